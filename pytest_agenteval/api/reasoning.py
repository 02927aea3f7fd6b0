"""A reasoning model's reply in two parts: the reasoning (its thoughts) and the answer
after it. Every scorer reads only the answer; a reply whose reasoning never closed has no
answer (`stop_reason: "thinking_truncated"`, scored incorrect).

The reasoning comes from the server where it separates it (vLLM's and SGLang's
`--reasoning-parser` put it in the message's `reasoning_content`, newer vLLM in
`reasoning`), else from the model's think tags in the text (`<think>...</think>` by
default; the chat template's or `--think-tags` otherwise)."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_THINK_TAGS = ("<think>", "</think>")


@dataclass(frozen=True)
class ReasonedText:
    """One reply, split. `reasoning` is None when the reply had no reasoning at all;
    `closed` is False when the reasoning started and never ended (nothing after it is an
    answer, however the text ends)."""

    answer: str
    reasoning: str | None = None
    closed: bool = True


def parse_think_tags(text: str) -> tuple[str, str]:
    """`--think-tags "<think>,</think>"` -> ("<think>", "</think>"); ValueError naming
    the fix for anything else."""
    parts = [part.strip() for part in text.split(",")]
    if len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
        raise ValueError(
            f"--think-tags {text!r}: give the opening and closing tag separated by a comma, "
            "e.g. --think-tags '<think>,</think>'"
        )
    return parts[0], parts[1]


def split_reasoning(
    text: str,
    *,
    reasoning_content: str | None = None,
    tags: tuple[str, str] = DEFAULT_THINK_TAGS,
    thinking: bool = False,
    truncated: bool = False,
) -> ReasonedText:
    """Split one reply into reasoning and answer.

    - `reasoning_content`: what the server separated (None or "" when it did not). The
      text is then the answer, unless it still holds think tags (Qwen3's parser leaves an
      unclosed block in the content), which are split as below.
    - think tags in `text`: everything up to the first closing tag is reasoning (the
      opening tag may be absent: templates that open the block in the prompt, Qwen3-2507
      thinking, DeepSeek-R1-0528, QwQ); the answer is what follows the closing tag.
      An opening tag without its closing tag: the reasoning never closed.
    - `thinking` (the run asked for thinking) with `truncated` (the reply hit its token
      limit) and no tag at all: the block was opened by the prompt and the reply was cut
      off inside it, so the whole text is unclosed reasoning.
    """
    opening, closing = tags
    server_reasoning = reasoning_content or None
    if server_reasoning is not None and opening not in text and closing not in text:
        # the server split it; a reply cut off inside the thoughts has no content at all
        closed = bool(text.strip()) or not truncated
        return ReasonedText(text if closed else "", server_reasoning, closed)
    end = text.find(closing)
    if end >= 0:
        before = text[:end]
        start = before.find(opening)
        thoughts = before[start + len(opening) :] if start >= 0 else before
        reasoning = _joined(server_reasoning, thoughts)
        return ReasonedText(text[end + len(closing) :], reasoning, True)
    start = text.find(opening)
    if start >= 0:
        return ReasonedText("", _joined(server_reasoning, text[start + len(opening) :]), False)
    if thinking and truncated:
        return ReasonedText("", _joined(server_reasoning, text), False)
    return ReasonedText(text, server_reasoning, True)


def _joined(first: str | None, second: str) -> str:
    return second if not first else f"{first}{second}"
