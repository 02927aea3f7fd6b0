"""Turn ``Reply`` objects into OpenAI wire-format choices, with token accounting."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_agenteval.testing._responders import (
    Reply,
    content_text,
    estimate_tokens,
    fill_placeholders,
    format_text_tool_call,
)


def tool_names(body: Mapping[str, Any]) -> frozenset[str]:
    """Functions the request declares; native tool calls are only emitted for these."""
    if body.get("tool_choice") == "none":
        return frozenset()
    names = set()
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and isinstance(tool.get("function"), dict):
            names.add(str(tool["function"].get("name")))
    return frozenset(names)


def estimate_prompt_tokens(body: Mapping[str, Any]) -> int:
    """4 chars per token plus 4 tokens of framing per chat message."""
    if "prompt" in body:
        prompt = body["prompt"]
        return estimate_tokens(prompt[0] if isinstance(prompt, list) else str(prompt))
    return sum(4 + estimate_tokens(content_text(m.get("content"))) for m in body["messages"])


def render_choice(
    reply: Reply,
    index: int,
    *,
    chat: bool,
    native_tools: frozenset[str],
    max_tokens: int | None,
    values: Mapping[str, object],
    call_id: str,
) -> tuple[dict[str, Any], int]:
    """One choice and its completion-token count.

    Tool calls the request did not declare (or any on ``/v1/completions``) are rendered
    as raw ``<tool_call>`` text, as a backend without tool parsing would emit them.
    ``max_tokens`` cuts the text at ``4 * max_tokens`` chars (finish_reason "length",
    tool calls dropped: the generation ended before reaching them).
    """
    text = reply.text
    if reply.template and text:
        text = fill_placeholders(text, {**values, "index": index})
    calls = list(reply.tool_calls)
    if calls and not (chat and all(c.name in native_tools for c in calls)):
        rendered = "\n".join(format_text_tool_call(c) for c in calls)
        text = f"{text}\n{rendered}" if text else rendered
        calls = []
    finish = "tool_calls" if calls else "stop"
    tokens = estimate_tokens(text)
    if max_tokens is not None and tokens > max_tokens:
        text, tokens, finish, calls = (text or "")[: 4 * max_tokens], max_tokens, "length", []
    tokens += sum(estimate_tokens(c.arguments_json()) for c in calls)
    if not chat:
        return {
            "index": index,
            "text": text or "",
            "logprobs": None,
            "finish_reason": finish,
        }, tokens
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {
                "id": f"{call_id}_{j}",
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments_json()},
            }
            for j, c in enumerate(calls)
        ]
    return {"index": index, "message": message, "logprobs": None, "finish_reason": finish}, tokens
