"""Gates that name models, evaluated on the real results files of three one-model runs
(the controller's data of a sweep: summaries and per-problem correctness per model)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_agenteval.output.gate import evaluate_sweep_gate, parse_gate


def test_the_runs_scored_what_the_models_answered(sweep_data: tuple[dict, dict]) -> None:
    summaries, _ = sweep_data
    assert {label: summaries[("aime25", label)]["average_at_n"] for _, label in summaries} == {
        "base": 0.25,
        "step-100": pytest.approx(4 / 12),
        "step-200": pytest.approx(11 / 12),
    }
    assert all(summaries[key]["complete"] for key in summaries)


@pytest.mark.parametrize(
    ("expression", "passed", "reason"),
    [
        (
            "aime25[step-200].average_at_n >= aime25[base].average_at_n + 0.02",
            True,
            "step-200 0.9167, base 0.2500: delta +0.6667, 95% interval [+0.4167, +0.9167] over 12 "
            "paired problems; delta >= +0.02 holds, and so does the paired interval",
        ),
        (
            "aime25[step-100].average_at_n >= aime25[base].average_at_n + 0.02",
            False,
            "step-100 0.3333, base 0.2500: delta +0.0833, 95% interval [+0.0000, +0.2500] over 12 "
            "paired problems; delta >= +0.02 holds, but the paired interval's lower bound +0.0000 is "
            "not at least +0.02: does not hold",
        ),
        ("aime25[step-200].average_at_n >= 0.9", True, "0.9167 >= 0.9 holds"),
        (
            "aime25.pass_at_n >= 0.3",
            False,
            "every model: base 0.2500 >= 0.3 does not hold; step-100 0.3333 >= 0.3 holds; step-200 "
            "0.9167 >= 0.3 holds",
        ),
    ],
)
def test_gates_on_a_sweeps_results(
    sweep_data: tuple[dict[tuple[str, str], Any], dict], expression: str, passed: bool, reason: str
) -> None:
    summaries, scores = sweep_data
    result = evaluate_sweep_gate(parse_gate(expression), summaries, scores, seed=0)
    assert (result.reason, result.passed) == (reason, passed)
