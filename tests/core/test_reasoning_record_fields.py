"""A generation's results line carries `reasoning`, `reasoning_tokens` and `answer_tokens`
only when it reasoned (docs/reasoning.md: "A generation without reasoning has none of the
three fields"). A sampler that split a plain reply finds no reasoning and counts it as 0
tokens (an endpoint with one sample, every in-process backend); OpenAI's non-reasoning models
report `reasoning_tokens: 0` too. Neither is reasoning."""

from __future__ import annotations

import pytest

from pytest_agenteval.api.records import THINKING_TRUNCATED, GenerationRecord, Rollout, Score

FIELDS = ("reasoning", "reasoning_tokens", "answer_tokens")


@pytest.mark.parametrize(
    ("reasoning", "reasoning_tokens", "stop_reason", "expected"),
    [
        (None, None, "answer", {}),  # no split at all: as before
        (None, 0, "answer", {}),  # split, nothing found (or a server's 0): as before
        (
            None,
            7,
            "answer",
            {"reasoning": None, "reasoning_tokens": 7, "answer_tokens": 3},
        ),  # hidden thoughts
        ("30 + 40", 4, "answer", {"reasoning": "30 + 40", "reasoning_tokens": 4, "answer_tokens": 6}),
        ("", 0, "answer", {"reasoning": "", "reasoning_tokens": 0, "answer_tokens": 10}),  # an empty block
        ("so", 10, THINKING_TRUNCATED, {"reasoning": "so", "reasoning_tokens": 10, "answer_tokens": 0}),
    ],
)
def test_the_reasoning_fields_appear_only_for_a_generation_that_reasoned(
    reasoning: str | None, reasoning_tokens: int | None, stop_reason: str, expected: dict
) -> None:
    rollout = Rollout(
        text="\\boxed{70}",
        stop_reason=stop_reason,
        completion_tokens=10,
        reasoning=reasoning,
        reasoning_tokens=reasoning_tokens,
    )
    line = GenerationRecord(0, 1, rollout, Score(True, True, "70")).to_dict()
    assert {k: line[k] for k in FIELDS if k in line} == expected
