"""evaluate_sweep_gate: a gate comparing two models holds only when the point estimates
satisfy it AND the paired bootstrap over the problems both ran agrees; it fails closed on
anything it cannot decide. Scores are built so the interval is known: identical models
(delta 0, interval [0, 0]), one model right wherever the other is wrong (interval [1, 1]),
and a small gain drowned in noise (a wide interval: [-0.275, +0.325] with seed 0;
a normal approximation gives +-0.298 around +0.025)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from pytest_agenteval.output.gate import evaluate_gate, evaluate_sweep_gate, parse_gate

Scores = dict[str, list[bool]]


def scores(correct: Sequence[Sequence[int]]) -> Scores:
    """Problem p's generations: 1 correct, 0 wrong."""
    return {str(p): [bool(x) for x in row] for p, row in enumerate(correct)}


def summary(average: float, **extra: Any) -> dict[str, Any]:
    return {"complete": True, "average_at_n": average, **extra}


ALL_RIGHT, ALL_WRONG, HALF = scores([[1, 1]] * 20), scores([[0, 0]] * 20), scores([[1, 0]] * 20)
# 40 problems, one generation each: step-200 solves 0-20 (21), base 19-38 (20): +1 problem net
GAIN = scores([[1]] * 21 + [[0]] * 19)
NOISE = scores([[0]] * 19 + [[1]] * 20 + [[0]])
SWEEP: dict[str, tuple[Mapping[tuple[str, str], Any], Mapping[tuple[str, str], Scores]]] = {
    "identical": (
        {("aime25", "base"): summary(0.5), ("aime25", "step-200"): summary(0.5)},
        {("aime25", "base"): HALF, ("aime25", "step-200"): HALF},
    ),
    "dominant": (
        {("aime25", "base"): summary(0.0), ("aime25", "step-200"): summary(1.0)},
        {("aime25", "base"): ALL_WRONG, ("aime25", "step-200"): ALL_RIGHT},
    ),
    "noise": (
        {
            ("aime25", "base"): summary(0.5, maj_at_n=0.5),
            ("aime25", "step-200"): summary(0.525, maj_at_n=0.525),
        },
        {("aime25", "base"): NOISE, ("aime25", "step-200"): GAIN},
    ),
    "pass@k": (
        {
            ("aime25", "base"): summary(0.5, pass_at_k={"1": 0.5, "2": 1.0}, pass_at_n=1.0),
            ("aime25", "step-200"): summary(0.5, pass_at_k={"1": 0.5, "2": 1.0}, pass_at_n=1.0),
        },
        {("aime25", "base"): HALF, ("aime25", "step-200"): HALF},
    ),
}
PLUS = "aime25[step-200].average_at_n >= aime25[base].average_at_n + 0.02"


@pytest.mark.parametrize(
    ("case", "expression", "passed", "reason"),
    [
        (
            "identical",
            PLUS,
            False,
            "step-200 0.5000, base 0.5000: delta +0.0000, 95% interval [+0.0000, +0.0000] over 20 "
            "paired problems; delta >= +0.02 does not hold",
        ),
        (  # "no worse": identical models hold it (interval [0, 0] is at least 0) ...
            "identical",
            "aime25[step-200].average_at_n >= aime25[base].average_at_n",
            True,
            "step-200 0.5000, base 0.5000: delta +0.0000, 95% interval [+0.0000, +0.0000] over 20 "
            "paired problems; delta >= +0 holds, and so does the paired interval",
        ),
        (  # ... and not "better"
            "identical",
            "aime25[step-200].average_at_n > aime25[base].average_at_n",
            False,
            "step-200 0.5000, base 0.5000: delta +0.0000, 95% interval [+0.0000, +0.0000] over 20 "
            "paired problems; delta > +0 does not hold",
        ),
        (
            "dominant",
            PLUS,
            True,
            "step-200 1.0000, base 0.0000: delta +1.0000, 95% interval [+1.0000, +1.0000] over 20 "
            "paired problems; delta >= +0.02 holds, and so does the paired interval",
        ),
        (
            "dominant",
            "aime25[base].average_at_n <= aime25[step-200].average_at_n - 0.5",
            True,
            "base 0.0000, step-200 1.0000: delta -1.0000, 95% interval [-1.0000, -1.0000] over 20 "
            "paired problems; delta <= -0.5 holds, and so does the paired interval",
        ),
        (
            "dominant",
            "aime25[base].average_at_n > aime25[step-200].average_at_n",
            False,
            "base 0.0000, step-200 1.0000: delta -1.0000, 95% interval [-1.0000, -1.0000] over 20 "
            "paired problems; delta > +0 does not hold",
        ),
        (
            "noise",
            PLUS,
            False,
            "step-200 0.5250, base 0.5000: delta +0.0250, 95% interval [-0.2750, +0.3250] over 40 "
            "paired problems; delta >= +0.02 holds, but the paired interval's lower bound -0.2750 is "
            "not at least +0.02: does not hold",
        ),
        (
            "noise",
            "aime25[step-200].average_at_n < aime25[base].average_at_n + 0.1",
            False,
            "step-200 0.5250, base 0.5000: delta +0.0250, 95% interval [-0.2750, +0.3250] over 40 "
            "paired problems; delta < +0.1 holds, but the paired interval's upper bound +0.3250 is "
            "not below +0.1: does not hold",
        ),
        (
            "noise",
            "aime25[step-200].maj_at_n >= aime25[base].maj_at_n + 0.02",
            True,
            "step-200 0.5250, base 0.5000: delta +0.0250; delta >= +0.02 holds (not paired: maj_at_n has "
            "no per-problem score in the generations' correctness; average_at_n, pass_at_n and "
            "pass_at_k.K have)",
        ),
        (
            "pass@k",
            "aime25[step-200].pass_at_k.2 >= aime25[base].average_at_n + 0.4",
            True,
            "step-200 pass_at_k.2 1.0000, base average_at_n 0.5000: delta +0.5000, 95% interval "
            "[+0.5000, +0.5000] over 20 paired problems; delta >= +0.4 holds, and so does the paired "
            "interval",
        ),
        (
            "pass@k",
            "aime25[step-200].pass_at_n >= aime25[base].pass_at_k.1 + 0.4",
            True,
            "step-200 pass_at_n 1.0000, base pass_at_k.1 0.5000: delta +0.5000, 95% interval "
            "[+0.5000, +0.5000] over 20 paired problems; delta >= +0.4 holds, and so does the paired "
            "interval",
        ),
        (
            "dominant",
            "aime25[step-200].average_at_n >= 0.99",
            True,
            "1.0000 >= 0.99 holds",
        ),
        (
            "dominant",
            "aime25[base].average_at_n >= 0.01",
            False,
            "0.0000 >= 0.01 does not hold",
        ),
        (
            "noise",
            "aime25.average_at_n >= 0.5",
            True,
            "every model: base 0.5000 >= 0.5 holds; step-200 0.5250 >= 0.5 holds",
        ),
        (
            "noise",
            "aime25.average_at_n > 0.5",
            False,
            "every model: base 0.5000 > 0.5 does not hold; step-200 0.5250 > 0.5 holds",
        ),
    ],
)
def test_evaluate_sweep_gate(case: str, expression: str, passed: bool, reason: str) -> None:
    summaries, per_problem = SWEEP[case]
    result = evaluate_sweep_gate(parse_gate(expression), summaries, per_problem, seed=0)
    assert (result.reason, result.passed) == (reason, passed)


def test_the_result_carries_both_values_the_delta_and_its_interval() -> None:
    summaries, per_problem = SWEEP["noise"]
    result = evaluate_sweep_gate(parse_gate(PLUS), summaries, per_problem, seed=0)
    assert result.as_dict() == {
        "gate": PLUS,
        "passed": False,
        "value": 0.525,
        "reason": result.reason,
        "other_value": 0.5,
        "delta": 0.025,
        "ci95": [-0.275, 0.325],
        "paired_problems": 40,
    }


def test_the_interval_follows_the_seed() -> None:
    summaries, per_problem = SWEEP["noise"]
    gate = parse_gate(PLUS)
    results = {seed: evaluate_sweep_gate(gate, summaries, per_problem, seed) for seed in (0, 1)}
    assert results[0].ci95 != results[1].ci95
    assert results[0].ci95 == evaluate_sweep_gate(gate, summaries, per_problem, 0).ci95


FEW = scores([[1]] * 4)
INCOMPLETE = {"complete": False, "average_at_n": 0.5, "incomplete": "1 of 20 problems errored, 0 missing"}
NOT_SCORED = {"complete": False, "average_at_n": None, "not_scored": "0 of 20 problems scored: 20 errored"}


@pytest.mark.parametrize(
    ("summaries", "per_problem", "expression", "reason"),
    [
        (
            {("aime25", "base"): summary(0.5)},
            {("aime25", "base"): HALF},
            PLUS,
            "no results for aime25[step-200]",
        ),
        (
            {("aime25", "step-200"): summary(0.5)},
            {("aime25", "step-200"): HALF},
            PLUS,
            "no results for aime25[base]",
        ),
        ({}, {}, "aime25[step-200].average_at_n >= 0.3", "no results for aime25[step-200]"),
        ({}, {}, "aime25.average_at_n >= 0.3", "no results for suite aime25"),
        (
            {("aime25", "base"): summary(0.5), ("aime25", "step-200"): INCOMPLETE},
            {("aime25", "base"): HALF, ("aime25", "step-200"): HALF},
            PLUS,
            "aime25[step-200] run incomplete (1 of 20 problems errored, 0 missing): gates fail closed",
        ),
        (
            {("aime25", "base"): INCOMPLETE, ("aime25", "step-200"): summary(0.5)},
            {("aime25", "base"): HALF, ("aime25", "step-200"): HALF},
            PLUS,
            "aime25[base] run incomplete (1 of 20 problems errored, 0 missing): gates fail closed",
        ),
        (
            {("aime25", "base"): NOT_SCORED, ("aime25", "step-200"): summary(0.5)},
            {("aime25", "base"): {}, ("aime25", "step-200"): HALF},
            PLUS,
            "aime25[base].average_at_n is n/a (0 of 20 problems scored: 20 errored): gates fail closed",
        ),
        (
            {("aime25", "base"): summary(0.0), ("aime25", "step-200"): summary(1.0)},
            {("aime25", "base"): scores([[0]] * 4), ("aime25", "step-200"): FEW},
            PLUS,
            "step-200 1.0000, base 0.0000: delta +1.0000; too few problems to decide (4 paired; need >= "
            "10): gates fail closed",
        ),
        (
            {("aime25", "base"): summary(0.0), ("aime25", "step-200"): summary(1.0)},
            {("aime25", "base"): {"a": [False]}, ("aime25", "step-200"): {"b": [True]}},
            PLUS,
            "step-200 1.0000, base 0.0000: delta +1.0000; no problem that both models ran: gates fail closed",
        ),
        (
            {("aime25", "base"): summary(0.0), ("aime25", "step-200"): summary(1.0)},
            {("aime25", "step-200"): ALL_RIGHT},
            PLUS,
            "step-200 1.0000, base 0.0000: delta +1.0000; no per-problem scores of aime25[base]: gates "
            "fail closed",
        ),
        (
            {
                ("aime25", "base"): summary(0.0, pass_at_k={"1": 0.0, "2": 0.0, "4": 0.0}),
                ("aime25", "step-200"): summary(1.0, pass_at_k={"1": 1.0, "2": 1.0, "4": 1.0}),
            },
            {("aime25", "base"): ALL_WRONG, ("aime25", "step-200"): ALL_RIGHT},
            "aime25[step-200].pass_at_k.4 >= aime25[base].pass_at_k.4",
            "step-200 1.0000, base 0.0000: delta +1.0000; pass_at_k.4 needs 4 generations of every "
            "problem, aime25[step-200] has 2: gates fail closed",
        ),
    ],
)
def test_sweep_gates_fail_closed(
    summaries: Mapping[tuple[str, str], Any],
    per_problem: Mapping[tuple[str, str], Scores],
    expression: str,
    reason: str,
) -> None:
    result = evaluate_sweep_gate(parse_gate(expression), summaries, per_problem, seed=0)
    assert (result.passed, result.reason) == (False, reason)


def test_the_point_comparison_ignores_float_noise() -> None:
    """0.3 - 0.1 is 0.19999999999999998 in floats: it still meets a margin of 0.2."""
    summaries = {("aime25", "a"): summary(0.5, maj_at_n=0.3), ("aime25", "b"): summary(0.5, maj_at_n=0.1)}
    gate = parse_gate("aime25[a].maj_at_n >= aime25[b].maj_at_n + 0.2")
    assert evaluate_sweep_gate(gate, summaries, {}, seed=0).passed


def test_a_gate_naming_a_model_fails_closed_outside_a_sweep() -> None:
    result = evaluate_gate(parse_gate("aime25[base].average_at_n >= 0"), {"aime25": summary(0.5)})
    assert (result.passed, result.reason) == (
        False,
        "names a model, but this run is not a sweep: gates fail closed",
    )
