"""Metric definitions with exact expected values (SPEC section 5)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from pytest_agenteval.api.metrics import (
    average_at_n,
    bootstrap_intervals,
    format_rate,
    maj_at_n,
    majority_answer,
    mean_code_calls,
    mean_turns,
    pass_at_k_curve,
    pass_at_n,
    shown,
    summarize_math,
    unbiased_pass_at_k,
)
from pytest_agenteval.api.records import GenerationRecord, ProblemRecord, Rollout, Score


def record(
    pid: int, outcomes: Sequence[tuple[bool, bool, object]], calls: int = 0, turns: int = 1
) -> ProblemRecord:
    """outcomes: (correct, formatted, answer) per generation."""
    generations = tuple(
        GenerationRecord(j, j, Rollout("t", "answer", turns=turns, code_calls=calls), Score(c, f, a))
        for j, (c, f, a) in enumerate(outcomes)
    )
    return ProblemRecord("aime25", pid, pid, "p", 1, len(generations), generations)


RIGHT = (True, True, 1)
WRONG = (False, True, 2)
UNBOXED = (False, False, None)

RECORDS = [
    record(0, [RIGHT, RIGHT, WRONG, UNBOXED], calls=2, turns=3),  # 2/4 correct
    record(1, [WRONG, WRONG, WRONG, UNBOXED]),  # 0/4
    record(2, [RIGHT, UNBOXED, UNBOXED, UNBOXED], calls=1),  # 1/4
]


def test_average_at_n_is_correct_generations_over_generations() -> None:
    assert average_at_n(RECORDS) == 3 / 12


def test_pass_at_n_is_problems_with_a_correct_generation() -> None:
    assert pass_at_n(RECORDS) == 2 / 3


def test_format_rate_counts_formatted_generations() -> None:
    assert format_rate(RECORDS) == 7 / 12


def test_mean_code_calls_and_turns_are_per_generation() -> None:
    assert mean_code_calls(RECORDS) == (4 * 2 + 4 * 1) / 12
    assert mean_turns(RECORDS) == (4 * 3 + 8 * 1) / 12


@pytest.mark.parametrize(
    "metric", [average_at_n, pass_at_n, format_rate, maj_at_n, mean_code_calls, mean_turns]
)
def test_empty_denominators_are_not_applicable_never_zero(metric) -> None:
    assert metric([]) is None  # nothing scored is no score: n/a, not 0.0 (issue 25 item 2)


def test_a_summary_of_nothing_scored_has_no_number() -> None:
    summary = summarize_math([])
    assert {k: summary[k] for k in ("average_at_n", "pass_at_n", "format_rate", "maj_at_n", "pass_at_k")} == {
        "average_at_n": None,
        "pass_at_n": None,
        "format_rate": None,
        "maj_at_n": None,
        "pass_at_k": {},
    }
    assert summary["ci95"] == dict.fromkeys(("average_at_n", "pass_at_n", "format_rate", "maj_at_n"))
    sandbox = summary["sandbox"]
    assert (sandbox["success_rate"], sandbox["error_rate"], sandbox["timeout_rate"]) == (None, None, None)


@pytest.mark.parametrize(
    ("summary", "text"),
    [
        ({"average_at_n": 0.25}, "0.250"),
        ({"average_at_n": 0}, "0.000"),
        ({"average_at_n": None, "not_scored": "0 of 2 problems scored: 2 errored, 0 missing"},
         "n/a (0 of 2 problems scored: 2 errored, 0 missing)"),
        ({"average_at_n": None}, "n/a (nothing scored)"),
        ({}, "n/a (nothing scored)"),
    ],
)  # fmt: skip
def test_shown_says_n_a_with_the_reason(summary: dict, text: str) -> None:
    assert shown(summary, "average_at_n") == text


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (4, 0, 1, 0.0),
        (4, 4, 3, 1.0),
        (4, 2, 1, 0.5),
        (4, 2, 2, 1 - 1 / 6),  # C(2,2)/C(4,2) = 1/6
        (4, 1, 2, 0.5),  # 1 - C(3,2)/C(4,2) = 1 - 3/6
        (12, 3, 4, 1 - 126 / 495),  # C(9,4)=126, C(12,4)=495
        (5, 3, 3, 1.0),  # n - c < k
    ],
)
def test_unbiased_pass_at_k(n: int, c: int, k: int, expected: float) -> None:
    assert unbiased_pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_unbiased_pass_at_k_rejects_k_above_n() -> None:
    with pytest.raises(ValueError):
        unbiased_pass_at_k(2, 1, 3)


def test_pass_at_k_curve_averages_over_problems() -> None:
    curve = pass_at_k_curve(RECORDS)
    assert list(curve) == ["1", "2", "3", "4"]
    assert curve["1"] == pytest.approx((0.5 + 0 + 0.25) / 3)
    assert curve["4"] == pytest.approx(2 / 3)


def test_majority_answer_ignores_missing_answers_and_breaks_ties_by_first_seen() -> None:
    assert majority_answer(record(0, [UNBOXED, WRONG, RIGHT, UNBOXED])) == 2
    assert majority_answer(record(0, [UNBOXED, UNBOXED])) is None


def test_maj_at_n_uses_the_most_common_answer() -> None:
    # problem 0: answer 1 twice (correct) vs 2 once; problem 1: only 2 (wrong);
    # problem 2: answer 1 once (correct)
    assert maj_at_n(RECORDS) == 2 / 3


def test_bootstrap_interval_brackets_the_point_estimate_and_is_deterministic() -> None:
    first = bootstrap_intervals(RECORDS, iterations=500, seed=3)
    again = bootstrap_intervals(RECORDS, iterations=500, seed=3)
    assert first == again
    low, high = first["pass_at_n"]
    assert 0.0 <= low <= 2 / 3 <= high <= 1.0
    assert first["average_at_n"][0] <= 0.25 <= first["average_at_n"][1]


def test_bootstrap_of_identical_problems_has_zero_width() -> None:
    same = [record(i, [RIGHT, WRONG]) for i in range(5)]
    assert bootstrap_intervals(same, iterations=200)["average_at_n"] == [0.5, 0.5]


def test_summary_keeps_the_seed_field_names() -> None:
    summary = summarize_math(RECORDS)
    assert {k: summary[k] for k in ("problems", "generations", "correct_generations", "passed_problems")} == {
        "problems": 3,
        "generations": 12,
        "correct_generations": 3,
        "passed_problems": 2,
    }
    assert summary["average_at_n"] == 0.25
