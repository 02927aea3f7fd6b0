"""The "adapter is live" check, as a pure function every backend can call: an adapter
whose greedy logprobs equal the base's was silently not applied (lm-eval #2432), or is a
step-0 no-op. Either way the numbers would be the base model's."""

from __future__ import annotations

import math
from collections.abc import Sequence

TOLERANCE = 1e-6  # fp noise between two requests of the same weights is far below any trained delta


def adapter_is_live(base_logprobs: Sequence[float], adapter_logprobs: Sequence[float]) -> bool:
    """True when the adapter's logprobs differ from the base's anywhere (beyond fp noise).
    Different lengths mean different greedy tokens: live. Empty inputs prove nothing: not live."""
    if not base_logprobs or not adapter_logprobs:
        return False
    if len(base_logprobs) != len(adapter_logprobs):
        return True
    return any(
        not math.isclose(a, b, rel_tol=0.0, abs_tol=TOLERANCE)
        for a, b in zip(base_logprobs, adapter_logprobs, strict=True)
    )


PROBE_PROMPT = "The capital of France is"
PROBE_TOKENS = 8


def greedy_logprobs(url: str, key: str | None, model: str, timeout_s: float = 120.0) -> list[float]:
    """Logprobs of a few greedy tokens from `/v1/completions` (vLLM, SGLang, llama.cpp)."""
    from pytest_agenteval.models.http.probe import request_json

    body = {
        "model": model,
        "prompt": PROBE_PROMPT,
        "max_tokens": PROBE_TOKENS,
        "temperature": 0.0,
        "top_p": 1.0,
        "seed": 0,
        "logprobs": 1,
    }
    status, payload = request_json(f"{url}/completions", api_key=key, body=body, timeout_s=timeout_s)
    if status != 200 or not isinstance(payload, dict):
        raise ValueError(f"{url}/completions answered HTTP {status} to the adapter probe")
    choice = payload["choices"][0]
    return [float(x) for x in (choice.get("logprobs") or {}).get("token_logprobs") or [] if x is not None]


def probe_adapter(url: str, key: str | None, base_name: str, adapter_name: str) -> dict[str, object]:
    """The recorded probe: both logprob lists and whether the adapter changes them."""
    base = greedy_logprobs(url, key, base_name)
    adapter = greedy_logprobs(url, key, adapter_name)
    return {
        "prompt": PROBE_PROMPT,
        "base": base_name,
        "adapter": adapter_name,
        "base_logprobs": base,
        "adapter_logprobs": adapter,
        "live": adapter_is_live(base, adapter),
    }
