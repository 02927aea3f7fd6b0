"""Server-sent events for the mock server: a finished JSON payload re-cut into the
chunks an OpenAI-protocol server streams (`stream: true`), usage last when
`stream_options.include_usage` asks for it, then `data: [DONE]`."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from pytest_agenteval.testing._think import reasoning_deltas

PIECE_CHARS = 16  # characters of content per chunk: several chunks for any real reply


def wants_stream(body: Mapping[str, Any]) -> bool:
    return body.get("stream") is True


def sse_events(payload: Mapping[str, Any], body: Mapping[str, Any]) -> Iterator[bytes]:
    """Every event of the stream, the final `[DONE]` included."""
    head = {k: payload[k] for k in ("id", "created", "model", "system_fingerprint") if k in payload}
    chat = payload["object"] == "chat.completion"
    head["object"] = "chat.completion.chunk" if chat else "text_completion"
    for choice in payload["choices"]:
        for delta in _deltas(choice, chat):
            yield _event({**head, "choices": [delta]})
    if (body.get("stream_options") or {}).get("include_usage"):
        yield _event({**head, "choices": [], "usage": payload["usage"]})
    yield b"data: [DONE]\n\n"


def _deltas(choice: Mapping[str, Any], chat: bool) -> Iterator[dict[str, Any]]:
    index = choice["index"]
    if not chat:
        text = choice.get("text") or ""
        for start in range(0, len(text), PIECE_CHARS):
            yield {"index": index, "text": text[start : start + PIECE_CHARS], "finish_reason": None}
        yield {"index": index, "text": "", "finish_reason": choice["finish_reason"]}
        return
    message = choice["message"]
    yield {"index": index, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
    yield from reasoning_deltas(message, index, PIECE_CHARS)  # a reasoning parser's, first
    text = message.get("content") or ""
    for start in range(0, len(text), PIECE_CHARS):
        yield {"index": index, "delta": {"content": text[start : start + PIECE_CHARS]}, "finish_reason": None}
    for j, call in enumerate(message.get("tool_calls") or ()):
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2  # arguments arrive in pieces, as real servers send them
        first = {
            "index": j,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": arguments[:half]},
        }
        yield {"index": index, "delta": {"tool_calls": [first]}, "finish_reason": None}
        rest = {"index": j, "function": {"arguments": arguments[half:]}}
        yield {"index": index, "delta": {"tool_calls": [rest]}, "finish_reason": None}
    yield {"index": index, "delta": {}, "finish_reason": choice["finish_reason"]}


def _event(chunk: Mapping[str, Any]) -> bytes:
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"
