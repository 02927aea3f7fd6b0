"""The official system prompt and the user message built from a task."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from pytest_agenteval.tasks.gaia import (
    GAIA_SYSTEM_PROMPT,
    AttachmentText,
    GaiaTask,
    build_messages,
    build_user_message,
    load_gaia,
)

# As quoted in notes/scorers.md section 2 (leaderboard Space content.py, commit 5822157).
OFFICIAL_PROMPT = (
    "You are a general AI assistant. I will ask you a question. Report your thoughts, and "
    "finish your answer with the following template: FINAL ANSWER: [YOUR FINAL ANSWER]. "
    "YOUR FINAL ANSWER should be a number OR as few words as possible OR a comma separated "
    "list of numbers and/or strings. If you are asked for a number, don't use comma to "
    "write your number neither use units such as $ or percent sign unless specified "
    "otherwise. If you are asked for a string, don't use articles, neither abbreviations "
    "(e.g. for cities), and write the digits in plain text unless specified otherwise. If "
    "you are asked for a comma separated list, apply the above rules depending of whether "
    "the element to be put in the list is a number or a string."
)


def test_system_prompt_is_the_official_text_verbatim() -> None:
    assert GAIA_SYSTEM_PROMPT == OFFICIAL_PROMPT
    assert hashlib.sha256(GAIA_SYSTEM_PROMPT.encode()).hexdigest() == (
        "60febcce2825942754e124cd07ce99757526012c0a1003eb1eae9c8ecb1ec28c"
    )


def test_question_without_attachment_is_the_question_alone() -> None:
    task = GaiaTask("t1", "What is 2 + 2?", 1, "4")
    assert build_user_message(task) == "What is 2 + 2?"


def test_attachment_text_is_included(make_gaia: Callable[..., Path]) -> None:
    task = next(t for t in load_gaia("validation", make_gaia()) if t.file_name == "scores.csv")
    assert build_user_message(task) == (
        "Which student has the highest score in the attached CSV file?\n"
        "\n"
        "The question comes with an attached file: scores.csv\n"
        "Text extracted from it (csv, all of it):\n"
        '<attachment name="scores.csv">\n'
        "student,score\nAlex,81\nBo,77\nDana,97\nEli,90\n"
        "</attachment>"
    )


def test_truncated_attachment_says_how_much_is_shown(make_gaia: Callable[..., Path]) -> None:
    task = next(t for t in load_gaia("validation", make_gaia()) if t.file_name == "scores.csv")
    message = build_user_message(task, max_chars=13, attachment_location="/sandbox/scores.csv")
    assert message.endswith(
        "The question comes with an attached file: scores.csv\n"
        "Your tools can open it at: /sandbox/scores.csv\n"
        "Text extracted from it (csv, the first 13 characters):\n"
        '<attachment name="scores.csv">\n'
        "student,score\n"
        "</attachment>"
    )


def test_unreadable_attachment_says_why() -> None:
    task = GaiaTask("t1", "Describe the image.", 2, "cat", "cat.png", Path("/data/cat.png"))
    note = AttachmentText("", "image", False, "cat.png: image files (.png) are not supported")
    assert build_user_message(task, note) == (
        "Describe the image.\n\nThe question comes with an attached file: cat.png\n"
        "Its contents are not included here (cat.png: image files (.png) are not supported)."
    )


def test_attachment_named_but_not_provided() -> None:
    task = GaiaTask("t1", "Q?", 1, "a", "x.txt", None)
    assert build_user_message(task).endswith(
        "Its contents are not included here (the file was not provided)."
    )


def test_messages_are_system_then_user() -> None:
    task = GaiaTask("t1", "What is 2 + 2?", 1, "4")
    assert build_messages(task) == [
        {"role": "system", "content": GAIA_SYSTEM_PROMPT},
        {"role": "user", "content": "What is 2 + 2?"},
    ]
