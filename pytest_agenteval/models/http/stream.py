"""Reading a streamed (SSE) chat or text completion back into the non-streamed shape.

Streaming is how a silent server is told apart from a long honest generation: a live
server sends a chunk every few tokens, so `--idle-timeout` seconds without a byte means
a stall, however long the whole generation takes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterable
from typing import Any


class StreamError(Exception):
    """The stream ended without its end (`[DONE]` or every choice's finish_reason), or
    carried a chunk that is not JSON: the reply is incomplete and the request retried."""


class StreamInterrupted(StreamError):
    """`[DONE]` came before a choice's finish_reason: the server cut the generation short
    (llama-cpp-python's server does so to every stream a newer request interrupts), so
    it cannot be trusted to stream."""


async def read_stream(lines: AsyncIterable[bytes]) -> dict[str, Any]:
    """The `choices` and `usage` of a finished stream, as a non-streamed body has them."""
    choices: dict[int, dict[str, Any]] = {}
    usage: dict[str, Any] = {}
    head: dict[str, Any] = {}  # the reply's `model` and `system_fingerprint`, on every chunk
    done = False
    async for raw in lines:
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue  # blank separators, comments (": keep-alive"), event names
        data = line[5:].strip()
        if data == b"[DONE]":
            done = True
            break
        try:
            chunk = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise StreamError("a chunk is not JSON") from exc
        if not isinstance(chunk, dict):
            raise StreamError("a chunk is not a JSON object")
        if chunk.get("error"):
            raise StreamError(f"the server sent an error mid-stream: {chunk['error']}")
        usage = chunk.get("usage") or usage
        head.update((k, chunk[k]) for k in ("model", "system_fingerprint") if chunk.get(k))
        try:
            for part in chunk.get("choices") or ():
                index = int(part.get("index") or 0)
                _merge(choices.setdefault(index, {"index": index}), part)
        except (TypeError, AttributeError, ValueError) as exc:  # a field of another type
            raise StreamError(f"a chunk is not of the protocol's shape: {exc}") from exc
    finished = bool(choices) and all(c.get("finish_reason") for c in choices.values())
    if done and not finished:
        raise StreamInterrupted("[DONE] before the reply's finish_reason")
    if not finished:
        raise StreamError("the stream ended before the reply did")
    return {**head, "choices": [_finish(c) for _, c in sorted(choices.items())], "usage": usage}


def _merge(choice: dict[str, Any], part: dict[str, Any]) -> None:
    if part.get("finish_reason"):
        choice["finish_reason"] = part["finish_reason"]
    if "text" in part:  # /v1/completions
        choice["text"] = choice.get("text", "") + (part.get("text") or "")
    if part.get("token_ids"):
        choice.setdefault("token_ids", []).extend(part["token_ids"])
    delta = part.get("delta") or {}
    if delta.get("content"):
        choice["content"] = choice.get("content", "") + delta["content"]
    for name in ("reasoning_content", "reasoning"):  # a reasoning parser's (vLLM, SGLang)
        if isinstance(delta.get(name), str) and delta[name]:
            choice["reasoning_content"] = choice.get("reasoning_content", "") + delta[name]
    for call in delta.get("tool_calls") or ():
        calls = choice.setdefault("tool_calls", {})
        slot = calls.setdefault(int(call.get("index", len(calls))), {"id": "", "name": "", "arguments": ""})
        slot["id"] = call.get("id") or slot["id"]
        function = call.get("function") or {}
        slot["name"] += function.get("name") or ""
        slot["arguments"] += function.get("arguments") or ""


def _finish(choice: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"index": choice["index"], "finish_reason": choice.get("finish_reason") or "stop"}
    if "token_ids" in choice:
        out["token_ids"] = choice["token_ids"]
    if "text" in choice and "content" not in choice and "tool_calls" not in choice:
        out["text"] = choice["text"]
        return out
    message: dict[str, Any] = {"role": "assistant", "content": choice.get("content", "")}
    if choice.get("reasoning_content"):
        message["reasoning_content"] = choice["reasoning_content"]
    calls = choice.get("tool_calls")
    if calls:
        message["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for _, c in sorted(calls.items())
        ]
    out["message"] = message
    return out
