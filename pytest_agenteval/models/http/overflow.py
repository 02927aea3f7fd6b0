"""The one place that reads a server's refusal as a context overflow.

Each server says it its own way, so this is necessarily per server; everything past this
function sees only `ContextOverflowError`. By a code where the server gives one, else by
the server's own sentence (vLLM and SGLang have no code for it):

- llama.cpp's server: 400, `error.type` `exceed_context_size_error` with `n_prompt_tokens`
  and `n_ctx`;
- OpenAI, and llama-cpp-python's server: 400, `error.code` `context_length_exceeded`;
- vLLM: 400 `BadRequestError`, "This model's maximum context length is N tokens. However,
  you requested M tokens (P in the messages, C in the completion)..." (older), "...However,
  your request has P input tokens..." (newer), or "'max_tokens' or 'max_completion_tokens'
  is too large: C. This model's maximum context length is N tokens and your request has P
  input tokens (C > N - P)";
- SGLang: 400, "The input (P tokens) is longer than the model's context length (N tokens)."
  or "Requested token count exceeds the model's maximum context length of N tokens. You
  requested a total of M tokens: P tokens from the input messages and C tokens for the
  completion...".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pytest_agenteval.api.sampler import ContextOverflowError

OVERFLOW_STATUS = frozenset({400, 413})
LLAMA_SERVER_TYPE = "exceed_context_size_error"
OPENAI_CODE = "context_length_exceeded"

# (context, prompt) from each server's sentence; group names say which number is which
_SENTENCES = (
    # vLLM (and OpenAI's older wording): the context first, then the prompt or the total
    re.compile(
        r"maximum context length is (?P<context>\d+) tokens.{0,40}?"
        r"(?:your request has (?P<prompt>\d+) input tokens"
        r"|you requested (?P<total>\d+) tokens(?: \((?P<messages>\d+) in the messages)?"
        r"|your messages resulted in (?P<resulted>\d+) tokens)",
        re.S,
    ),
    # SGLang: the prompt alone over the context
    re.compile(
        r"The input \((?P<prompt>\d+) tokens\) is longer than the model's context length \((?P<context>\d+)"
    ),
    # SGLang: the prompt and the completion over the context
    re.compile(
        r"exceeds the model's maximum context length of (?P<context>\d+) tokens\. "
        r"You requested a total of (?P<total>\d+) tokens: (?P<prompt>\d+) tokens from the input"
    ),
)


def context_overflow(
    status: int, raw: bytes | str | Mapping[str, Any], where: str
) -> ContextOverflowError | None:
    """The overflow a server's error reply says, or None for any other refusal.
    `raw`: the reply's body (bytes, text or parsed JSON); `where`: who said it, for the
    message (an endpoint URL, `trio`)."""
    if status not in OVERFLOW_STATUS:
        return None
    payload = _parsed(raw)
    error = payload.get("error", payload) if isinstance(payload, Mapping) else payload
    if not isinstance(error, Mapping):
        return _from_sentence(str(error or ""), where)
    message = str(error.get("message") or "")
    if error.get("type") == LLAMA_SERVER_TYPE:
        return ContextOverflowError(_int(error.get("n_prompt_tokens")), _int(error.get("n_ctx")), where)
    found = _from_sentence(message, where)
    if found is None and error.get("code") == OPENAI_CODE:
        return ContextOverflowError(None, None, where)  # OpenAI's newer wording has no numbers
    return found


def _from_sentence(message: str, where: str) -> ContextOverflowError | None:
    for pattern in _SENTENCES:
        match = pattern.search(message)
        if match is None:
            continue
        numbers = {k: int(v) for k, v in match.groupdict().items() if v is not None}
        prompt = numbers.get("prompt") or numbers.get("messages") or numbers.get("resulted")
        if prompt is None:
            prompt = numbers.get("total")  # the prompt and the reply's room, as the server adds them
        return ContextOverflowError(prompt, numbers.get("context"), where)
    return None


def _parsed(raw: bytes | str | Mapping[str, Any]) -> Any:
    if isinstance(raw, Mapping):
        return raw
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    try:
        return json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return text


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
