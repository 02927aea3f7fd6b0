"""BFCL metrics and the progressive planner: exact values on small hand-made runs."""

from __future__ import annotations

import pytest

from pytest_agenteval.tasks.bfcl import BfclItemResult, next_stage, progressive_stages, summarize_bfcl


def _result(category, valid, *, lenient=None, error=None, predicted=True, params=(0, 0)):
    return BfclItemResult(
        id=f"{category}_x",
        category=category,
        valid=valid,
        lenient_valid=valid if lenient is None else lenient,
        error_type=error,
        expected_call="irrelevance" not in category,
        predicted_call=predicted,
        params_total=params[0],
        params_correct=params[1],
    )


RUN = [
    _result("simple_python", True, params=(2, 2)),
    _result("simple_python", False, lenient=True, error="value_error:string", params=(2, 1)),
    _result("simple_java", True, params=(3, 3)),
    _result("multiple", True),
    _result("multiple", True),
    _result("live_simple", True),
    _result("live_simple", True),
    _result("live_simple", False, error="value_error:string", predicted=False, params=(4, 0)),
    _result("live_multiple", False, error="simple_function_checker:wrong_func_name", predicted=False),
    _result("irrelevance", True, predicted=False),
    _result("irrelevance", False, error="irrelevance_error:decoder_success", predicted=True),
]


@pytest.fixture(scope="module")
def summary():
    return summarize_bfcl(RUN)


def test_overall_accuracy_error_rate_and_lenient_accuracy(summary):
    assert (summary["items"], summary["correct"]) == (11, 7)
    assert summary["accuracy"] == pytest.approx(7 / 11)
    assert summary["error_rate"] == pytest.approx(4 / 11)
    assert summary["lenient_accuracy"] == pytest.approx(8 / 11)


def test_per_category_rows_follow_the_official_category_order(summary):
    assert list(summary["per_category"]) == [
        "simple_python",
        "simple_java",
        "multiple",
        "irrelevance",
        "live_simple",
        "live_multiple",
    ]
    assert summary["per_category"]["simple_python"] == {
        "correct": 1,
        "total": 2,
        "accuracy": 0.5,
        "lenient_accuracy": 1.0,
    }


def test_groups_use_the_present_categories_only(summary):
    assert summary["groups"] == pytest.approx(
        {
            "simple": 0.75,  # mean(0.5, 1.0): simple_javascript is absent
            "non_live": 0.875,  # mean(simple 0.75, multiple 1.0)
            "live": 0.5,  # pooled: 2 of 4 live items
            "irrelevance": 0.5,
            "relevance": None,
            "multi_turn": None,
            "web_search": None,
            "memory": None,
            "agentic": None,
            "overall": (10 * 0.875 + 10 * 0.5 + 10 * 0.5) / 30,  # official weights, groups present
        }
    )


def test_official_groups_count_absent_categories_as_zero(summary):
    assert summary["groups_official"] == pytest.approx(
        {
            "simple": 0.5,  # (0.5 + 1.0 + 0) / 3
            "non_live": 0.375,  # (0.5 + 1.0 + 0 + 0) / 4
            "live": 2 / 44,  # absent live categories weigh their official counts 16 and 24
            "irrelevance": 0.25,
            "relevance": 0.0,
            "multi_turn": 0.0,
            "web_search": 0.0,
            "memory": 0.0,
            "agentic": 0.0,
            "overall": (10 * 0.375 + 10 * 2 / 44 + 10 * 0.25) / 100,  # the leaderboard's overall
        }
    )


MULTI_TURN_RUN = [
    _result("multi_turn_base", True),
    _result("multi_turn_base", False, error="multi_turn:instance_state_mismatch"),
    _result("multi_turn_miss_func", True),
    _result("multi_turn_long_context", False, error="multi_turn:force_terminated"),
    _result("simple_python", True),
]


def test_multi_turn_group_is_the_mean_of_its_present_categories():
    summary = summarize_bfcl(MULTI_TURN_RUN)
    assert list(summary["per_category"]) == [
        "simple_python",
        "multi_turn_base",
        "multi_turn_miss_func",
        "multi_turn_long_context",
    ]
    assert summary["groups"]["multi_turn"] == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    assert summary["groups_official"]["multi_turn"] == pytest.approx((0.5 + 1.0 + 0.0 + 0.0) / 4)


def test_overall_weighs_multi_turn_30_against_10_for_non_live():
    summary = summarize_bfcl(MULTI_TURN_RUN)
    # present: non_live = simple = simple_python = 1.0; multi_turn = 0.5
    assert summary["overall"] == pytest.approx((10 * 1.0 + 30 * 0.5) / 40)
    official_non_live = (1.0 / 3) / 4
    assert summary["overall_official"] == pytest.approx((10 * official_non_live + 30 * 0.375) / 100)


def test_multi_turn_items_stay_out_of_relevance_detection():
    assert summarize_bfcl(MULTI_TURN_RUN)["relevance"]["tp"] == 1


def test_weighted_accuracy_defaults_to_the_mean_of_present_categories(summary):
    assert summary["weighted_accuracy"] == pytest.approx((0.5 + 1 + 1 + 2 / 3 + 0 + 0.5) / 6)


def test_weighted_accuracy_ignores_weights_of_absent_categories():
    weights = {"simple_python": 3, "multiple": 1, "parallel": 5}
    assert summarize_bfcl(RUN, weights)["weighted_accuracy"] == pytest.approx(0.625)


def test_negative_weights_are_rejected():
    with pytest.raises(ValueError, match="weights must be >= 0: multiple"):
        summarize_bfcl(RUN, {"multiple": -1})


def test_relevance_detection_treats_an_expected_call_as_positive(summary):
    assert summary["relevance"] == pytest.approx(
        {"precision": 7 / 8, "recall": 7 / 9, "f1": 14 / 17, "tp": 7, "fp": 1, "fn": 2, "tn": 1}
    )


def test_parameter_accuracy_pools_parameters(summary):
    assert summary["parameter_accuracy"] == pytest.approx(6 / 11)


def test_error_types_are_counted_most_frequent_first(summary):
    assert list(summary["error_types"].items()) == [
        ("value_error:string", 2),
        ("irrelevance_error:decoder_success", 1),
        ("simple_function_checker:wrong_func_name", 1),
    ]


GROUPS = [
    "simple",
    "non_live",
    "live",
    "irrelevance",
    "relevance",
    "multi_turn",
    "web_search",
    "memory",
    "agentic",
    "overall",
]


def test_an_empty_run_is_not_applicable_never_zero():
    summary = summarize_bfcl([])  # every item errored: nothing behind a rate (issue 25 item 2)
    assert summary == {
        "items": 0,
        "correct": 0,
        "accuracy": None,
        "lenient_accuracy": None,
        "error_rate": None,
        "per_category": {},
        "overall": None,
        "overall_official": None,
        "groups": dict.fromkeys(GROUPS),
        "groups_official": None,
        "weighted_accuracy": None,
        "parameter_accuracy": None,
        "relevance": {
            "precision": None,
            "recall": None,
            "f1": None,
            "tp": 0,
            "fp": 0,
            "fn": 0,
            "tn": 0,
        },
        "error_types": {},
    }


@pytest.mark.parametrize(
    ("n_items", "stages", "expected"),
    [
        (400, (5, 50), [5, 50, 400]),
        (50, (5, 50), [5, 50]),
        (30, (5, 50), [5, 30]),
        (5, (5, 50), [5]),
        (3, (5, 50), [3]),
        (0, (5, 50), []),
        (400, (10,), [10, 400]),
    ],
)
def test_progressive_stages_are_cumulative_prefix_sizes(n_items, stages, expected):
    assert progressive_stages(n_items, stages) == expected


@pytest.mark.parametrize(
    ("results", "expected"),
    [
        ([], 5),
        ([True] * 3, 5),  # an unfinished stage is completed first
        ([True] * 4 + [False], 50),  # 0.8 reaches the threshold
        ([True] * 3 + [False] * 2, None),  # 0.6 stops the run
        ([True] * 40 + [False] * 10, 400),
        ([True] * 39 + [False] * 11, None),
        ([True] * 400, None),  # all stages done
    ],
)
def test_next_stage_runs_on_only_while_accuracy_reaches_the_threshold(results, expected):
    assert next_stage(results, [5, 50, 400], 0.8) == expected


def test_progressive_stages_reject_bad_sizes():
    with pytest.raises(ValueError):
        progressive_stages(10, (0, 5))
