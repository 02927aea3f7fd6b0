"""GAIA metrics: exact values from small, hand-checked result tables."""

from __future__ import annotations

import itertools
import json

import pytest

from pytest_agenteval.tasks.gaia import GaiaItemResult, drop_rate, percentile, summarize_gaia

_ids = itertools.count(1)


def _item(level: int, correct: bool | None, **fields: object) -> GaiaItemResult:
    return GaiaItemResult(f"t{next(_ids)}", level, correct, **fields)  # type: ignore[arg-type]


def _results(table: dict[int, tuple[int, int]]) -> list[GaiaItemResult]:
    """{level: (correct, total)} as result items."""
    return [_item(level, index < hits) for level, (hits, total) in table.items() for index in range(total)]


def test_seed_example_levels_and_drop_rates() -> None:
    # The seed's reading: L1/L2/L3 = 100% / 66.7% / 50% -> drops of 33.3% and 25%.
    summary = summarize_gaia(_results({1: (3, 3), 2: (2, 3), 3: (1, 2)}))
    assert summary["per_level"] == {
        "1": {"correct": 3, "total": 3, "accuracy": 1.0},
        "2": {"correct": 2, "total": 3, "accuracy": 2 / 3},
        "3": {"correct": 1, "total": 2, "accuracy": 0.5},
    }
    assert summary["drop_rates"] == {"1->2": pytest.approx(1 / 3), "2->3": pytest.approx(0.25)}
    assert summary["accuracy"] == 6 / 8
    assert (summary["items"], summary["scored"], summary["correct"]) == (8, 8, 6)


def test_drop_rate_is_null_when_the_easier_level_scores_zero() -> None:
    summary = summarize_gaia(_results({1: (0, 2), 2: (1, 2), 3: (0, 1)}))
    assert summary["drop_rates"] == {"1->2": None, "2->3": 1.0}


def test_drop_rate_is_null_when_a_level_is_absent() -> None:
    summary = summarize_gaia(_results({1: (1, 2), 3: (1, 2)}))
    assert summary["per_level"].keys() == {"1", "3"}
    assert summary["drop_rates"] == {"1->2": None, "2->3": None}


def test_drop_rate_is_negative_when_the_harder_level_does_better() -> None:
    summary = summarize_gaia(_results({1: (1, 4), 2: (1, 2)}))
    assert summary["drop_rates"] == {"1->2": -1.0, "2->3": None}


def test_levels_beyond_three_get_their_own_drop_rate() -> None:
    summary = summarize_gaia(_results({3: (1, 2), 4: (1, 4)}))
    assert summary["drop_rates"] == {"1->2": None, "2->3": None, "3->4": 0.5}


@pytest.mark.parametrize(
    ("higher", "lower", "expected"),
    [(1.0, 0.5, 0.5), (0.8, 0.8, 0.0), (0.0, 0.5, None), (None, 0.5, None), (0.5, None, None)],
)
def test_drop_rate(higher: float | None, lower: float | None, expected: float | None) -> None:
    assert drop_rate(higher, lower) == expected


def test_unscored_items_are_left_out_of_accuracy() -> None:
    items = [_item(1, True), _item(1, None), _item(2, False), _item(2, None)]
    summary = summarize_gaia(items)
    assert (summary["items"], summary["scored"], summary["accuracy"]) == (4, 2, 0.5)
    assert summary["per_level"] == {
        "1": {"correct": 1, "total": 1, "accuracy": 1.0},
        "2": {"correct": 0, "total": 1, "accuracy": 0.0},
    }


def test_test_split_without_answers() -> None:
    summary = summarize_gaia([_item(1, None, tokens=10), _item(3, None, tokens=30)])
    assert summary["accuracy"] is None  # nothing to compare: n/a, never 0.0 (issue 25 item 2)
    assert summary["not_scored"] == (
        "0 of 2 items scored: none has an answer to compare (the test split's are private)"
    )
    assert summary["per_level"] == {}
    assert summary["drop_rates"] == {"1->2": None, "2->3": None}
    assert (summary["tokens_total"], summary["tokens_mean"]) == (40, 20.0)


def test_empty_results() -> None:
    assert summarize_gaia([]) == {
        "items": 0,
        "scored": 0,
        "correct": 0,
        "accuracy": None,
        "not_scored": None,  # no items: the controller says why (0 of N problems scored)
        "errors": 0,
        "error_rate": None,
        "per_level": {},
        "drop_rates": {"1->2": None, "2->3": None},
        "mean_steps_correct": None,
        "mean_annotator_steps_correct": None,
        "mean_annotator_steps": None,
        "tokens_total": 0,
        "tokens_mean": None,
        "latency_mean_s": None,
        "latency_p50_s": None,
        "latency_p95_s": None,
    }


def test_mean_steps_over_correct_answers_beside_the_annotators() -> None:
    items = [
        _item(1, True, steps=4, annotator_steps=3),
        _item(1, True, steps=6, annotator_steps=None),
        _item(2, True, steps=None, annotator_steps=5),
        _item(2, False, steps=20, annotator_steps=9),
        _item(3, None, steps=7, annotator_steps=None),
    ]
    summary = summarize_gaia(items)
    assert summary["mean_steps_correct"] == 5.0
    assert summary["mean_annotator_steps_correct"] == 4.0
    assert summary["mean_annotator_steps"] == pytest.approx(17 / 3)


def test_mean_steps_are_null_without_correct_answers() -> None:
    summary = summarize_gaia([_item(1, False, steps=3, annotator_steps=2)])
    assert summary["mean_steps_correct"] is None
    assert summary["mean_annotator_steps_correct"] is None
    assert summary["mean_annotator_steps"] == 2.0


def test_tokens_latency_and_errors() -> None:
    items = [
        _item(1, True, tokens=100, latency_s=4.0),
        _item(1, False, tokens=300, latency_s=1.0, error=True),
        _item(2, False, tokens=0, latency_s=3.0),
        _item(2, True, tokens=200, latency_s=2.0),
    ]
    summary = summarize_gaia(items)
    assert (summary["tokens_total"], summary["tokens_mean"]) == (600, 150.0)
    assert summary["latency_mean_s"] == 2.5
    assert summary["latency_p50_s"] == 2.5
    assert summary["latency_p95_s"] == pytest.approx(3.85)
    assert (summary["errors"], summary["error_rate"]) == (1, 0.25)


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([], 50, None),
        ([7.0], 95, 7.0),
        ([1.0, 2.0, 3.0], 50, 2.0),
        ([3.0, 1.0], 50, 2.0),
        ([1.0, 2.0, 3.0, 4.0, 5.0], 0, 1.0),
        ([1.0, 2.0, 3.0, 4.0, 5.0], 100, 5.0),
    ],
)
def test_percentile(values: list[float], q: float, expected: float | None) -> None:
    assert percentile(values, q) == expected


def test_summary_is_json_ready() -> None:
    summary = summarize_gaia(_results({1: (1, 2), 2: (0, 1)}))
    assert json.loads(json.dumps(summary)) == summary


def test_input_may_be_any_iterable() -> None:
    assert summarize_gaia(iter(_results({1: (1, 2)})))["accuracy"] == 0.5
