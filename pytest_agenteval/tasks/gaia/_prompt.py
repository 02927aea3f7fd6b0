"""GAIA's official system prompt and the default user message for a task.

``GAIA_SYSTEM_PROMPT`` is the leaderboard's prompt verbatim (Space
``content.py``, commit 5822157). Its answer-format rules are what the
official scorer's number/list/string rules expect, so keep it unchanged when
comparing with leaderboard numbers.
"""

from __future__ import annotations

from pathlib import Path

from pytest_agenteval.tasks.gaia._data import GaiaTask
from pytest_agenteval.tasks.gaia._files import DEFAULT_MAX_CHARS, AttachmentText, read_attachment

GAIA_SYSTEM_PROMPT = (
    "You are a general AI assistant. I will ask you a question. Report your thoughts, "
    "and finish your answer with the following template: FINAL ANSWER: [YOUR FINAL "
    "ANSWER]. YOUR FINAL ANSWER should be a number OR as few words as possible OR a "
    "comma separated list of numbers and/or strings. If you are asked for a number, "
    "don't use comma to write your number neither use units such as $ or percent sign "
    "unless specified otherwise. If you are asked for a string, don't use articles, "
    "neither abbreviations (e.g. for cities), and write the digits in plain text "
    "unless specified otherwise. If you are asked for a comma separated list, apply "
    "the above rules depending of whether the element to be put in the list is a "
    "number or a string."
)


def build_user_message(
    task: GaiaTask,
    attachment: AttachmentText | None = None,
    *,
    attachment_location: str | Path | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> str:
    """The question, plus a note about the attached file and its extracted text.

    ``attachment`` is read from ``task.file_path`` with :func:`read_attachment`
    when not given. ``attachment_location`` is where the agent's tools can open
    the file (for example its copy in the sandbox); it is mentioned when given.
    """
    if not task.file_name:
        return task.question
    if attachment is None and task.file_path is not None:
        attachment = read_attachment(task.file_path, max_chars=max_chars)
    parts = [task.question, "", f"The question comes with an attached file: {task.file_name}"]
    if attachment_location is not None:
        parts.append(f"Your tools can open it at: {attachment_location}")
    if attachment is None or attachment.error:
        reason = attachment.error if attachment else "the file was not provided"
        parts.append(f"Its contents are not included here ({reason}).")
        return "\n".join(parts)
    shown = f"the first {len(attachment.text)} characters" if attachment.truncated else "all of it"
    parts += [
        f"Text extracted from it ({attachment.kind}, {shown}):",
        f'<attachment name="{task.file_name}">',
        attachment.text.rstrip("\n"),
        "</attachment>",
    ]
    return "\n".join(parts)


def build_messages(
    task: GaiaTask,
    attachment: AttachmentText | None = None,
    *,
    attachment_location: str | Path | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> list[dict[str, str]]:
    """Chat messages for ``task``: the official system prompt, then the user message."""
    user = build_user_message(task, attachment, attachment_location=attachment_location, max_chars=max_chars)
    return [
        {"role": "system", "content": GAIA_SYSTEM_PROMPT},
        {"role": "user", "content": user},
    ]
