"""Gate expressions: parsing at start-up, evaluation that fails closed."""

from __future__ import annotations

import pytest

from pytest_agenteval.output.gate import GateError, check_metric_name, evaluate_gate, parse_gate


@pytest.mark.parametrize(
    ("expression", "suite", "metric", "op", "threshold"),
    [
        ("aime25.average_at_n >= 0.30", "aime25", "average_at_n", ">=", 0.30),
        ("aime25.pass_at_n>0.5", "aime25", "pass_at_n", ">", 0.5),
        (
            "bfcl.per_category.simple_python.accuracy < 1",
            "bfcl",
            "per_category.simple_python.accuracy",
            "<",
            1.0,
        ),
        ("gaia.accuracy >= 30%", "gaia", "accuracy", ">=", 0.30),
        ("aime25.pass_at_k.1 == .25", "aime25", "pass_at_k.1", "==", 0.25),
        ("gaia.drop_rates.1->2 <= 0.5", "gaia", "drop_rates.1->2", "<=", 0.5),
    ],
)
def test_parse_gate(expression: str, suite: str, metric: str, op: str, threshold: float) -> None:
    gate = parse_gate(expression)
    assert (gate.suite, gate.metric, gate.op, gate.threshold) == (suite, metric, op, pytest.approx(threshold))


@pytest.mark.parametrize(
    "expression",
    ["average_at_n >= 0.3", "aime25.average_at_n => 0.3", "aime25.average_at_n >= high", "", "aime25. >= 1"],
)
def test_bad_gate_is_a_one_line_error(expression: str) -> None:
    with pytest.raises(GateError, match=r"expected SUITE\.METRIC OP NUMBER") as info:
        parse_gate(expression)
    assert "\n" not in str(info.value)


def test_metric_typo_is_caught_for_known_suites() -> None:
    with pytest.raises(GateError, match="aime25 has no metric 'averge_at_n'"):
        check_metric_name(parse_gate("aime25.averge_at_n >= 0.3"), {"aime25": ("average_at_n",)})
    check_metric_name(parse_gate("custom.anything >= 0.3"), {"aime25": ("average_at_n",)})


SUMMARY = {"aime25": {"complete": True, "average_at_n": 0.25, "pass_at_k": {"1": 0.25}, "model": "x"}}


@pytest.mark.parametrize(
    ("expression", "summaries", "passed", "reason"),
    [
        ("aime25.average_at_n >= 0.25", SUMMARY, True, "0.2500 >= 0.25 holds"),
        ("aime25.average_at_n > 0.25", SUMMARY, False, "0.2500 > 0.25 does not hold"),
        ("aime25.pass_at_k.1 < 0.3", SUMMARY, True, "0.2500 < 0.3 holds"),
        ("bfcl.accuracy >= 0", SUMMARY, False, "no results for suite bfcl"),
        (
            "aime25.nothing >= 0",
            SUMMARY,
            False,
            "nothing is n/a (no value in the summary): gates fail closed",
        ),
        (
            "aime25.average_at_n >= 0",
            {
                "aime25": {
                    "average_at_n": None,
                    "complete": False,
                    "not_scored": "0 of 2 problems scored: 2 errored, 0 missing",
                }
            },
            False,
            "average_at_n is n/a (0 of 2 problems scored: 2 errored, 0 missing): gates fail closed",
        ),
        (
            "aime25.average_at_n <= 1",
            {
                "aime25": {
                    **SUMMARY["aime25"],
                    "complete": False,
                    "incomplete": "1 of 3 problems errored, 0 missing",
                }
            },
            False,
            "run incomplete (1 of 3 problems errored, 0 missing): gates fail closed",
        ),
        ("aime25.model >= 0", SUMMARY, False, "model is 'x', not a number"),
        ("aime25.complete >= 0", SUMMARY, False, "complete is True, not a number"),
        (
            "aime25.average_at_n >= 0.1",
            {"aime25": {**SUMMARY["aime25"], "complete": False}},
            False,
            "run incomplete: gates fail closed",
        ),
    ],
)
def test_evaluate_gate(expression: str, summaries: dict, passed: bool, reason: str) -> None:
    result = evaluate_gate(parse_gate(expression), summaries)
    assert (result.passed, result.reason) == (passed, reason)
