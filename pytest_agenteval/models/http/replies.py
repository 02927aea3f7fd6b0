"""Reading an OpenAI-compatible reply: its choices as `Completion`s, with each sample's
own tokens where the reply says them, and a server's error message."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from pytest_agenteval.api.sampler import Completion, ToolCall


class Retryable(Exception):
    """A failed attempt worth another. `sent`: whether the server may have generated (and
    billed) anything for it; False only where it provably did not: a refused connection,
    a 429 or 5xx status before any body (the budget releases those, models/cost/meter.py)."""

    def __init__(self, cause: str, retry_after: float | None = None, *, sent: bool = True) -> None:
        super().__init__(cause)
        self.cause = cause
        self.retry_after = retry_after
        self.sent = sent


def error_message(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace").strip()
    try:
        payload = json.loads(text)
        error = payload.get("error", payload)
        if isinstance(error, Mapping):
            return str(error.get("message") or error)
        return str(error)
    except (json.JSONDecodeError, AttributeError):
        return text[:200] or "(empty body)"


def parse_completions(data: Mapping[str, Any], latency: float, attempts: int) -> list[Completion]:
    """Every choice; the request's attempts are counted once, on the first. A request
    of several choices (`n`) has one usage, as servers report it: each sample records
    the prompt's tokens (the prompt of every one) and its own completion tokens where
    the reply says them (token ids, logprobs), else None; the request's usage goes on
    the first sample (`request_usage`), {} on the others."""
    try:
        choices = sorted(data["choices"], key=lambda c: c.get("index", 0))
        if not choices:
            raise IndexError("no choices")
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise Retryable("bad_json") from exc
    usage = data.get("usage") or {}
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    cached = cached_prompt_tokens(usage)
    served = {k: v for k in ("model", "system_fingerprint") if isinstance(v := data.get(k), str)}
    if len(choices) == 1:
        only = _parse_choice(choices[0], prompt, completion, latency, attempts)
        reported = reported_reasoning_tokens(usage)  # the request's: this one sample's
        return [dataclasses.replace(only, cached_prompt_tokens=cached, reasoning_tokens=reported, **served)]
    request = {"prompt_tokens": prompt, "completion_tokens": completion}
    if cached:
        request["cached_prompt_tokens"] = cached
    return [
        dataclasses.replace(
            _parse_choice(choice, prompt, _own_tokens(choice), latency, attempts if i == 0 else 0),
            request_usage=request if i == 0 else {},
            **served,
        )
        for i, choice in enumerate(choices)
    ]


def cached_prompt_tokens(usage: Mapping[str, Any]) -> int:
    """The prompt tokens a reply says the provider served from its prompt cache (OpenAI:
    `usage.prompt_tokens_details.cached_tokens`), 0 where it says nothing."""
    details = usage.get("prompt_tokens_details")
    value = details.get("cached_tokens") if isinstance(details, Mapping) else None
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else 0


def reported_reasoning_tokens(usage: Mapping[str, Any]) -> int | None:
    """The reasoning tokens a reply's usage reports (OpenAI, SGLang:
    `usage.completion_tokens_details.reasoning_tokens`), None where it says nothing."""
    details = usage.get("completion_tokens_details")
    value = details.get("reasoning_tokens") if isinstance(details, Mapping) else None
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def server_reasoning(message: Mapping[str, Any]) -> str | None:
    """What the server's reasoning parser separated from the content: vLLM's and SGLang's
    `reasoning_content`, newer vLLM's `reasoning`; None when neither is there."""
    for name in ("reasoning_content", "reasoning"):
        value = message.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def _own_tokens(choice: Any) -> int | None:
    """A choice's own completion tokens where the reply says them: its sampled ids
    (vLLM `return_token_ids`), else its logprobs (one entry a token); else None."""
    if not isinstance(choice, Mapping):
        return None
    if isinstance(choice.get("token_ids"), list):
        return len(choice["token_ids"])
    logprobs = choice.get("logprobs")
    if isinstance(logprobs, Mapping):
        entries = logprobs.get("content")  # chat
        if not isinstance(entries, list):
            entries = logprobs.get("tokens")  # completions
        if isinstance(entries, list):
            return len(entries)
    return None


def _parse_choice(
    choice: Mapping[str, Any],
    prompt_tokens: int,
    completion_tokens: int | None,
    latency: float,
    attempts: int,
) -> Completion:
    if not isinstance(choice, Mapping):
        raise Retryable("bad_json")
    message = choice.get("message") or {"content": choice.get("text")}  # chat, or completions
    calls = tuple(
        ToolCall(
            name=(call.get("function") or {}).get("name", ""),
            arguments=(call.get("function") or {}).get("arguments") or "",
            id=call.get("id", ""),
        )
        for call in message.get("tool_calls") or ()
    )
    return Completion(
        text=message.get("content") or "",
        finish_reason=choice.get("finish_reason") or "stop",
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        tool_calls=calls,
        latency_s=latency,
        attempts=attempts,
        token_ids=tuple(int(t) for t in choice.get("token_ids") or ()),
        reasoning=server_reasoning(message),  # split from the text by the sampler (ThinkSplit)
    )
