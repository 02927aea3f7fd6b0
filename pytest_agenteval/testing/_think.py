"""Reasoning models for the mock server: replies with think blocks, and the split a
server's reasoning parser makes of them (vLLM's and SGLang's `--reasoning-parser`).

`think_reply(thoughts, answer)` writes `<think>thoughts</think>answer` (`opened=False`:
no opening tag, as when the chat template opened the block in the prompt; a reply longer
than the request's max_tokens is cut there with finish_reason "length", so a long
`thoughts` gives an unclosed block). `ServerConfig.reasoning_parser` then moves the
thoughts out of `content`, byte for byte as vLLM's parsers do:

- "none": no parser; the tags stay in the content.
- "deepseek_r1": a leading `<think>` dropped; everything up to `</think>` is reasoning;
  without `</think>` ALL of it is reasoning and the content is null (a reply cut off in
  its thoughts).
- "qwen3": only a reply with both tags is split; without `</think>` the whole text stays
  in the content, `<think>` and all (the unclosed block scorers must still recognise).

`ServerConfig.reasoning_field` names the message field ("reasoning_content"; newer vLLM
"reasoning"), streamed as deltas of that field before the content's; and
`report_reasoning_tokens` adds `usage.completion_tokens_details.reasoning_tokens` (the
reasoning's tokens at 4 characters a token), as OpenAI and SGLang report them."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

from pytest_agenteval.testing._responders import Reply, estimate_tokens

REASONING_PARSERS = ("none", "deepseek_r1", "qwen3")
REASONING_FIELDS = ("reasoning_content", "reasoning")
OPEN, CLOSE = "<think>", "</think>"


def think_reply(
    thoughts: str,
    answer: str = "",
    *,
    closed: bool = True,
    opened: bool = True,
    tags: tuple[str, str] = (OPEN, CLOSE),
) -> Reply:
    """One reply of a reasoning model (literal text: no placeholders filled)."""
    opening, closing = tags
    head = opening if opened else ""
    return Reply(text=f"{head}{thoughts}{closing}{answer}" if closed else f"{head}{thoughts}")


def parse_reasoning(text: str, parser: str) -> tuple[str | None, str | None]:
    """(reasoning, content) as the named parser returns them for a whole reply."""
    if parser == "none":
        return None, text
    if parser == "qwen3" and (OPEN not in text or CLOSE not in text):
        return None, text
    before, found, after = text.partition(OPEN)
    rest = after if found else before
    if CLOSE not in rest:
        return (rest, None) if parser == "deepseek_r1" else (None, rest)
    reasoning, _, content = rest.partition(CLOSE)
    return reasoning, content or None


def split_choices(choices: list[MutableMapping[str, Any]], config: Any) -> int:
    """Apply the config's reasoning parser to each chat choice in place; the reasoning
    tokens of them all (for usage's completion_tokens_details)."""
    total = 0
    for choice in choices:
        message = choice.get("message")
        if not isinstance(message, MutableMapping) or config.reasoning_parser == "none":
            continue
        reasoning, content = parse_reasoning(message.get("content") or "", config.reasoning_parser)
        message["content"] = content
        if reasoning is not None:
            message[config.reasoning_field] = reasoning
            total += estimate_tokens(reasoning)
    return total


def usage_details(reasoning_tokens: int, config: Any) -> dict[str, Any]:
    """The usage fields the reasoning adds ({} unless `report_reasoning_tokens`)."""
    if not config.report_reasoning_tokens:
        return {}
    return {"completion_tokens_details": {"reasoning_tokens": reasoning_tokens}}


def reasoning_deltas(message: Mapping[str, Any], index: int, piece: int) -> list[dict[str, Any]]:
    """The streamed deltas of a message's reasoning field (before its content's)."""
    for name in REASONING_FIELDS:
        text = message.get(name)
        if isinstance(text, str) and text:
            return [
                {"index": index, "delta": {name: text[start : start + piece]}, "finish_reason": None}
                for start in range(0, len(text), piece)
            ]
    return []
