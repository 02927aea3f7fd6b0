"""Krippendorff's alpha on published tables, and the panel's severity and outliers."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_agenteval.stats.bootstrap import resamples
from pytest_agenteval.tasks.datagen import krippendorff_alpha, panel_summary, reliability_units
from pytest_agenteval.tasks.datagen._panel import ALPHA_ITERATIONS

n = None
# The `krippendorff` package's docstring example (3 coders, 15 units, missing values).
THREE_CODERS = [
    [n, n, n, n, n, 3, 4, 1, 2, 1, 1, 3, 3, n, 3],
    [1, n, 2, 1, 3, 3, 4, 3, n, n, n, n, n, n, n],
    [n, n, 2, 1, 3, 4, 4, n, 2, 1, 1, 3, 3, n, 4],
]
# Krippendorff (2011), "Computing Krippendorff's alpha-reliability": 4 observers, 12 units.
FOUR_OBSERVERS = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, n, n, n],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, n, 3],
    [n, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, n],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, n],
]


@pytest.mark.parametrize(
    ("table", "level", "alpha"),
    [
        (THREE_CODERS, "nominal", 0.691358),
        (THREE_CODERS, "interval", 0.810845),
        (FOUR_OBSERVERS, "nominal", 0.743421),
        (FOUR_OBSERVERS, "ordinal", 0.815388),
        (FOUR_OBSERVERS, "interval", 0.849107),
        (FOUR_OBSERVERS, "ratio", 0.797403),
    ],
)
def test_alpha_on_published_tables(table, level, alpha) -> None:
    assert round(krippendorff_alpha(reliability_units(table), level), 6) == alpha


def test_alpha_is_undefined_without_variation_or_pairs() -> None:
    assert krippendorff_alpha([[5, 5, 5], [5, 5]], "ordinal") is None
    assert krippendorff_alpha([[1], [2, n]], "ordinal") is None
    assert krippendorff_alpha([[1, 1], [2, 2]], "ordinal") == 1.0


def scores(c: int, cl: int | None = None, d: int | None = None, co: int | None = None) -> dict[str, int]:
    return {"correctness": c, "clarity": cl or c, "difficulty_match": d or c, "completeness": co or c}


def test_identical_judges_give_null_alpha_with_a_reason_and_full_agreement() -> None:
    table = {f"g{i}": {"a": scores(5), "b": scores(5), "c": scores(5)} for i in range(3)}
    panel = panel_summary(table, ["a", "b", "c"], seed=1)
    assert panel["alpha"]["correctness"]["alpha"] is None
    assert "no variation" in panel["alpha"]["correctness"]["reason"]
    assert panel["agreement"]["correctness"] == {"exact": 1.0, "within_1": 1.0}
    assert panel["flagged_judges"] == []


def test_a_single_far_score_is_an_outlier_at_three_judges() -> None:
    # (5, 5, 1): the seed's |z| > 2 rule cannot fire (|z| <= 1.15 at 3 judges); ours does
    table = {"g0": {"a": scores(5), "b": scores(5), "c": scores(1)}}
    panel = panel_summary(table, ["a", "b", "c"], seed=1)
    assert panel["outlier_count"] == 4  # judge c on all four dimensions
    assert {o["judge"] for o in panel["outliers"]} == {"c"}
    assert panel["per_judge"]["c"]["outlier_rate"] == 1.0
    assert panel["per_judge"]["a"]["outlier_rate"] == 0.0


def test_a_lenient_judge_is_flagged_with_its_severity() -> None:
    table = {
        f"g{i}": {"strict1": scores(2 + i % 2), "strict2": scores(2 + i % 2), "lenient": scores(5)}
        for i in range(4)
    }
    panel = panel_summary(table, ["strict1", "strict2", "lenient"], seed=1)
    assert panel["flagged_judges"] == ["lenient"]
    assert panel["per_judge"]["lenient"]["severity"] == 2.5  # 5 - the panel median (2 or 3)
    assert panel["per_judge"]["strict1"]["severity"] == 0.0
    assert panel["per_judge"]["lenient"]["reasons"] == ["outlier on 100% of scores", "lenient by 2.50 points"]
    dropped = panel["per_judge"]["lenient"]["alpha_total_if_dropped"]
    assert dropped == 1.0 and dropped > panel["alpha"]["total"]["alpha"]


def test_an_invalid_verdict_is_missing_data_not_a_score() -> None:
    table = {
        "g0": {"a": scores(4), "b": scores(4), "c": None},
        "g1": {"a": scores(2), "b": scores(2), "c": scores(2)},
    }
    panel = panel_summary(table, ["a", "b", "c"], seed=1)
    assert panel["alpha"]["correctness"]["alpha"] == 1.0
    assert panel["outlier_count"] == 0


def test_review_order_puts_disagreement_first() -> None:
    table = {
        "calm": {"a": scores(3), "b": scores(3)},
        "split": {"a": scores(1), "b": scores(5)},
        "mild": {"a": scores(3), "b": scores(4)},
    }
    assert panel_summary(table, ["a", "b"], seed=1)["review_order"] == ["split", "mild", "calm"]


def test_one_judge_is_not_a_panel() -> None:
    assert panel_summary({"g0": {"a": scores(3)}}, ["a"], seed=1) is None


def test_resamples_without_variation_are_counted_not_dropped() -> None:
    # two items where both judges give 5, one where they differ: a resample that draws only
    # the first two has no variation and no alpha; it is counted beside the interval
    table = {
        "same1": {"a": scores(5), "b": scores(5)},
        "same2": {"a": scores(5), "b": scores(5)},
        "split": {"a": scores(2), "b": scores(3)},
    }
    entry = panel_summary(table, ["a", "b"], seed=6)["alpha"]["total"]
    allowed = np.array([True, True, False])  # items in table order; the module's own stream
    expected = sum(int(allowed[rows].all(axis=1).sum()) for rows in resamples(3, ALPHA_ITERATIONS, 6))
    assert entry["undefined_resamples"] == expected
    assert 0 < expected < ALPHA_ITERATIONS
    assert entry["ci95"] is not None
