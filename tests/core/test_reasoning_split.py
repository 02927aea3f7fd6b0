"""api/reasoning.py: a reply split into reasoning and answer, every shape a server or a
model's template gives it, with exact expected values."""

from __future__ import annotations

import pytest

from pytest_agenteval.api.reasoning import DEFAULT_THINK_TAGS, ReasonedText, parse_think_tags, split_reasoning

SEED = ("<seed:think>", "</seed:think>")

# (id, text, keyword arguments, expected)
CASES = [
    ("plain text untouched", "The answer is 4.", {}, ReasonedText("The answer is 4.", None, True)),
    (
        "closed block",
        "<think>2+2 is 4</think>\n\nThe answer is 4.",
        {},
        ReasonedText("\n\nThe answer is 4.", "2+2 is 4", True),
    ),
    (
        "unclosed block (cut off inside the thoughts)",
        "<think>2+2 is",
        {"truncated": True},
        ReasonedText("", "2+2 is", False),
    ),
    (
        "unclosed block, the model stopped: still no answer",
        "<think>2+2 is 4",
        {},
        ReasonedText("", "2+2 is 4", False),
    ),
    (
        "close tag only (the template opened the block in the prompt)",
        "2+2 is 4\n</think>\n\n\\boxed{4}",
        {"thinking": True},
        ReasonedText("\n\n\\boxed{4}", "2+2 is 4\n", True),
    ),
    (
        "a boxed answer inside the thoughts is not the answer",
        "<think>maybe \\boxed{3}? no</think>So \\boxed{4}",
        {},
        ReasonedText("So \\boxed{4}", "maybe \\boxed{3}? no", True),
    ),
    (
        "a boxed answer only inside unclosed thoughts: no answer",
        "<think>maybe \\boxed{3}",
        {"truncated": True},
        ReasonedText("", "maybe \\boxed{3}", False),
    ),
    (
        "server split: reasoning_content with content",
        "\n\nThe answer is 4.",
        {"reasoning_content": "2+2 is 4"},
        ReasonedText("\n\nThe answer is 4.", "2+2 is 4", True),
    ),
    (
        "server split: reasoning_content, no content, finish length (deepseek_r1 parser, cut off)",
        "",
        {"reasoning_content": "2+2 is", "truncated": True},
        ReasonedText("", "2+2 is", False),
    ),
    (
        "server split: reasoning_content, no content, finished (the model ended in its thoughts)",
        "",
        {"reasoning_content": "2+2 is 4"},
        ReasonedText("", "2+2 is 4", True),
    ),
    (
        "server split, empty reasoning_content: as if none",
        "The answer is 4.",
        {"reasoning_content": ""},
        ReasonedText("The answer is 4.", None, True),
    ),
    (
        "qwen3 parser: no </think>, so the unclosed block stays in the content",
        "<think>\n2+2 is",
        {"reasoning_content": None, "truncated": True, "thinking": True},
        ReasonedText("", "\n2+2 is", False),
    ),
    (
        "server split and the rest of the thoughts in the content",
        "and checked</think>4",
        {"reasoning_content": "2+2 is 4 "},
        ReasonedText("4", "2+2 is 4 and checked", True),
    ),
    (
        "custom tags",
        "<seed:think>2+2 is 4</seed:think>4",
        {"tags": SEED},
        ReasonedText("4", "2+2 is 4", True),
    ),
    (
        "custom tags: the default tags are text",
        "<think>not a tag here</think>4",
        {"tags": SEED},
        ReasonedText("<think>not a tag here</think>4", None, True),
    ),
    (
        "--thinking on, finish length, no tags: cut off in a block the prompt opened",
        "2+2 is",
        {"thinking": True, "truncated": True},
        ReasonedText("", "2+2 is", False),
    ),
    (
        "--thinking off, finish length, no tags: an answer cut short, not reasoning",
        "The answer is",
        {"truncated": True},
        ReasonedText("The answer is", None, True),
    ),
    (
        "--thinking on, finished, no tags: the answer",
        "4",
        {"thinking": True},
        ReasonedText("4", None, True),
    ),
    (
        "an empty block: empty reasoning, the answer after it",
        "<think>\n\n</think>\n\n4",
        {},
        ReasonedText("\n\n4", "\n\n", True),
    ),
    (
        "closed, then cut off in the answer: closed (the answer is what there is)",
        "<think>2+2 is 4</think>The answer is",
        {"thinking": True, "truncated": True},
        ReasonedText("The answer is", "2+2 is 4", True),
    ),
    (
        "only the first closing tag ends the reasoning",
        "<think>a</think>b</think>c",
        {},
        ReasonedText("b</think>c", "a", True),
    ),
]


@pytest.mark.parametrize(("text", "kwargs", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_split_reasoning(text: str, kwargs: dict, expected: ReasonedText) -> None:
    assert split_reasoning(text, **kwargs) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("<think>,</think>", ("<think>", "</think>")),
        (" <seed:think> , </seed:think> ", SEED),
        ("[THINK],[/THINK]", ("[THINK]", "[/THINK]")),
    ],
)
def test_parse_think_tags(value: str, expected: tuple[str, str]) -> None:
    assert parse_think_tags(value) == expected


@pytest.mark.parametrize("value", ["<think>", "<think>,", ",</think>", "<t>,<t>", "a,b,c", ""])
def test_parse_think_tags_refuses(value: str) -> None:
    with pytest.raises(ValueError, match=r"give the opening and closing tag separated by a comma, e\.g\."):
        parse_think_tags(value)


def test_default_tags() -> None:
    assert DEFAULT_THINK_TAGS == ("<think>", "</think>")
