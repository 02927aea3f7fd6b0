"""The single-turn solver: ask once, score the reply."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_agenteval.api.records import Rollout
from pytest_agenteval.api.sampler import Completion
from pytest_agenteval.solvers.answer import answer_only, answer_stop_reason, estimated_mark


def single_turn_rollout(completion: Completion, extra: Mapping[str, Any] | None = None) -> Rollout:
    """The rollout of a suite that asks once and scores the reply: its answer only (a
    reply cut off inside its thoughts is `thinking_truncated`, with no text)."""
    completion = answer_only(completion)
    return Rollout(
        text=completion.text,
        stop_reason=answer_stop_reason(completion),
        finish_reason=completion.finish_reason,
        prompt_tokens=completion.prompt_tokens,
        completion_tokens=completion.completion_tokens,
        latency_s=completion.latency_s,
        attempts=completion.attempts,
        retries=max(0, completion.attempts - 1),
        cached=completion.cached,
        extra={**(extra or {}), **_request_usage(completion), **estimated_mark([completion])},
        reasoning=completion.reasoning,
        reasoning_tokens=completion.reasoning_tokens,
    )


def _request_usage(completion: Completion) -> dict[str, Any]:
    """One of several samples of one request: its usage, counted once (counted_tokens)."""
    if completion.request_usage is None:
        return {}
    return {"request_usage": dict(completion.request_usage)}
