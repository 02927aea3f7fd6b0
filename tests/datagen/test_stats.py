"""Intervals and the LLM-judge metrics, with exact expected values."""

from __future__ import annotations

import pytest

from pytest_agenteval.stats.bootstrap import cluster_bootstrap
from pytest_agenteval.tasks.datagen import decide, gate_presets, pointwise_summary, wilson
from pytest_agenteval.tasks.datagen._stats import item_passes


@pytest.mark.parametrize(
    ("k", "n", "interval"),
    [
        (15, 30, [0.331541, 0.668459]),  # N = 30 cannot decide a 45 % gate (notes 4.2)
        (24, 30, [0.626943, 0.904949]),  # pass rate 80 % at N = 30
        (0, 5, [0.0, 0.434482]),
        (5, 5, [0.565518, 1.0]),
        (0, 0, None),
    ],
)
def test_wilson_interval(k: int, n: int, interval: list[float] | None) -> None:
    assert wilson(k, n) == interval


def pw(judge: str, scores: tuple[int, int, int, int] | None) -> dict:
    if scores is None:
        return {"judge": judge, "kind": "pointwise", "status": "invalid", "parse_mode": "prompt", "asks": 3}
    dims = ("correctness", "clarity", "difficulty_match", "completeness")
    return {
        "judge": judge,
        "kind": "pointwise",
        "status": "valid",
        "parse_mode": "prompt",
        "asks": 1,
        "scores": dict(zip(dims, scores, strict=True)),
    }


def test_boundaries_compare_integer_sums() -> None:
    assert item_passes([pw("j", (4, 3, 4, 3))]) is True  # 14 -> mean 3.5: passes
    assert item_passes([pw("j", (4, 3, 3, 3))]) is False
    assert item_passes([pw("a", (4, 3, 4, 3)), pw("b", (3, 3, 4, 3))]) is False  # panel mean 3.375
    assert item_passes([pw("j", None)]) is None


def test_pointwise_summary_counts_invalid_verdicts_and_never_scores_them() -> None:
    items = [
        [pw("j", (4, 3, 4, 3))],  # mean 3.5: pass
        [pw("j", (5, 4, 5, 4))],  # mean 4.5: excellent
        [pw("j", None)],  # invalid: counted, not scored
        [pw("j", (2, 2, 2, 2))],
    ]
    summary = pointwise_summary(items, seed=1)
    assert summary["judgments"] == 4
    assert (summary["valid"], summary["invalid"], summary["errors"]) == (3, 1, 0)
    assert summary["valid_rate"] == 0.75
    assert (summary["items_scored"], summary["items_without_valid_verdict"]) == (3, 1)
    assert summary["mean_score"] == round(10 / 3, 6)
    assert summary["pass_rate"] == 2 / 3
    assert summary["pass_rate_ci95"] == wilson(2, 3)
    assert summary["excellent_rate"] == 1 / 3
    assert summary["per_dimension"]["correctness"]["mean"] == round(11 / 3, 6)
    assert summary["per_judge"]["j"]["valid_rate"] == 0.75
    assert summary["per_judge"]["j"]["reasked"] == 1


def test_valid_rate_has_an_interval_that_never_collapses_at_one() -> None:
    # 4 items x 2 judges, every verdict valid: the judges' verdicts on an item are one cluster
    summary = pointwise_summary([[pw("a", (4, 4, 4, 4)), pw("b", (3, 3, 3, 3))] for _ in range(4)], seed=1)
    assert summary["valid_rate"] == 1.0
    assert summary["valid_rate_ci95"] == wilson(8, 8) == [0.675592, 1.0]
    assert summary["undefined_resamples"] == {"mean_score_ci95": 0, "valid_rate_ci95": 0}


def test_all_invalid_gives_null_metrics_with_counts() -> None:
    summary = pointwise_summary([[pw("j", None)], [pw("j", None)]], seed=1)
    assert summary["valid_rate"] == 0.0
    assert summary["mean_score"] is None and summary["pass_rate"] is None
    assert summary["mean_score_ci95"] is None
    assert summary["items_without_valid_verdict"] == 2


def test_bootstrap_is_deterministic_under_a_seed() -> None:
    data = [1.3, 2.71, 3.05, 4.9, 5.43, 0.2, 7.77]

    def mean(xs):
        return sum(xs) / len(xs)

    assert cluster_bootstrap(data, mean, seed=7) == cluster_bootstrap(data, mean, seed=7)
    assert cluster_bootstrap(data, mean, seed=7) != cluster_bootstrap(data, mean, seed=8)
    assert cluster_bootstrap([1.0], mean, seed=7).bounds() is None


@pytest.mark.parametrize(
    ("value", "ci", "verdict"),
    [
        (0.5, [0.331541, 0.668459], "undecided"),  # 15/30 against 0.45
        (0.3, [0.2, 0.44], "fail"),
        (0.6, [0.46, 0.7], "pass"),
        (None, None, "no data"),
        (0.5, None, "pass"),
    ],
)
def test_gate_decision_against_the_interval(value, ci, verdict) -> None:
    assert decide(value, ci, 0.45) == verdict


def test_presets_warn_when_n_cannot_decide() -> None:
    summary = {
        "winrate": {"win_rate": 0.5, "win_rate_ci95": wilson(15, 30)},
        "judge": {
            "mean_score": 4.2,
            "mean_score_ci95": [4.1, 4.3],
            "valid": 30,
            "judgments": 30,
            "valid_rate": 1.0,
        },
    }
    presets = {p["gate"]: p for p in gate_presets(summary)}
    assert presets["datagen.winrate.win_rate >= 0.45"]["verdict"] == "undecided"
    assert "contains 0.45" in presets["datagen.winrate.win_rate >= 0.45"]["warning"]
    assert presets["datagen.judge.mean_score >= 4.0"]["verdict"] == "pass"
    assert presets["datagen.human.approved_rate >= 0.9"]["verdict"] == "no data"
    assert presets["datagen.judge.valid_rate >= 0.98"]["verdict"] == "undecided"  # 30/30: CI low 0.886
