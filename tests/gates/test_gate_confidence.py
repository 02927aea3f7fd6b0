"""Gates with a stated confidence (`... @ 0.95`, `--agenteval-gate-confidence`): the grammar,
the decision from Hoeffding's interval over a complete run's draws, and the run's terminal
line, summary fields, JUnit properties and exit status against the test server."""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET

import pytest

from pytest_agenteval.output.gate import GateError, evaluate_gate, parse_gate, with_confidence
from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import TINY_PROBLEMS, read_results


@pytest.mark.parametrize(
    ("expression", "metric", "op", "threshold", "confidence"),
    [
        ("aime25.average_at_n >= 0.4 @ 0.95", "average_at_n", ">=", 0.4, 0.95),
        ("aime25.average_at_n >= 40% @ 95%", "average_at_n", ">=", 0.4, 0.95),
        ("aime25.pass_at_k.4 < 0.5@0.9", "pass_at_k.4", "<", 0.5, 0.9),
        (
            "bfcl.per_category.simple_python.accuracy > 0.5 @ 0.99",
            "per_category.simple_python.accuracy",
            ">",
            0.5,
            0.99,
        ),
        ("gaia.per_level.2.accuracy <= 0.3 @ 0.95", "per_level.2.accuracy", "<=", 0.3, 0.95),
        ("aime25.average_at_n >= 0.4", "average_at_n", ">=", 0.4, None),
    ],
)
def test_grammar(expression, metric, op, threshold, confidence):
    gate = parse_gate(expression)
    assert (gate.metric, gate.op, gate.threshold, gate.confidence) == (metric, op, threshold, confidence)
    assert gate.expression == expression


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ("aime25.average_at_n >= 0.4 @ 1.5", "a confidence is within (0, 1)"),
        ("aime25.average_at_n >= 0.4 @ 0", "a confidence is within (0, 1)"),
        ("aime25.average_at_n == 0.4 @ 0.95", "never equal to it; use >=, >, <= or <"),
        ("aime25.mean_turns >= 2 @ 0.95", "mean_turns is not a mean of bounded draws"),
        ("aime25.pass_at_k.x >= 0.2 @ 0.95", "pass_at_k.x is not a mean of bounded draws"),
    ],
)
def test_refused(expression, error):
    with pytest.raises(GateError, match=re.escape(error)) as caught:
        parse_gate(expression)
    assert "\n" not in str(caught.value)


def test_a_gate_comparing_two_models_parses_with_a_level_for_paired_draws():
    """Sequential mode decides it on paired draws; a run without --agenteval-sequential
    refuses it at start-up (tests/sweep/test_sequential_sweep.py)."""
    gate = parse_gate("aime25[a].average_at_n >= aime25[b].average_at_n + 0.02 @ 0.95")
    assert (gate.label, gate.other.label, gate.threshold, gate.confidence) == ("a", "b", 0.02, 0.95)


def test_the_option_sets_threshold_gates_and_a_gates_own_level_wins():
    assert with_confidence(parse_gate("aime25.average_at_n >= 0.4"), 0.9).confidence == 0.9
    assert with_confidence(parse_gate("aime25.average_at_n >= 0.4 @ 0.99"), 0.9).confidence == 0.99
    two = parse_gate("aime25[a].average_at_n >= aime25[b].average_at_n")
    assert with_confidence(two, 0.9).confidence is None  # its paired bootstrap decides
    with pytest.raises(GateError, match="mean_turns is not a mean"):
        with_confidence(parse_gate("aime25.mean_turns >= 2"), 0.9)


def radius(draws: int, confidence: float = 0.95) -> float:
    return math.sqrt(math.log(2 / (1 - confidence)) / (2 * draws))


# (gate, summary, decision, interval): the interval is value +- sqrt(log(2 / alpha) / 2n)
DECISIONS = [
    ("aime25.average_at_n >= 0.4 @ 0.95", {"average_at_n": 0.62, "generations": 212}, "PASS", 0.62),
    ("aime25.average_at_n >= 0.4 @ 0.95", {"average_at_n": 0.42, "generations": 480}, "UNDECIDED", 0.42),
    ("aime25.average_at_n >= 0.4 @ 0.95", {"average_at_n": 0.30, "generations": 1920}, "FAIL", 0.30),
    ("aime25.average_at_n < 0.4 @ 0.95", {"average_at_n": 0.30, "generations": 1920}, "PASS", 0.30),
    ("aime25.pass_at_n >= 0.5 @ 0.9", {"pass_at_n": 0.9, "problems": 30, "generations": 480}, "PASS", 0.9),
    ("bfcl.accuracy >= 0.5 @ 0.95", {"accuracy": 0.55, "items": 100}, "UNDECIDED", 0.55),
    ("gaia.accuracy <= 0.5 @ 0.95", {"accuracy": 0.1, "scored": 50, "items": 60}, "PASS", 0.1),
    (
        "bfcl.per_category.simple.accuracy > 0.2 @ 0.95",
        {"per_category": {"simple": {"accuracy": 0.9, "total": 40}}},
        "PASS",
        0.9,
    ),
]


@pytest.mark.parametrize(("expression", "summary", "decision", "value"), DECISIONS)
def test_decisions(expression, summary, decision, value):
    gate = parse_gate(expression)
    draws_field = {"accuracy": "scored" if "scored" in summary else "items"}.get(gate.metric)
    result = evaluate_gate(gate, {gate.suite: {**summary, "complete": True}})
    assert result.decision == decision
    assert result.passed == (decision == "PASS")
    draws = result.draws
    assert draws == (summary[draws_field] if draws_field else draws)
    low, high = result.interval
    assert low == pytest.approx(max(0.0, value - radius(draws, gate.confidence)))
    assert high == pytest.approx(min(1.0, value + radius(draws, gate.confidence)))
    assert result.as_dict()["decision"] == decision and result.as_dict()["confidence"] == gate.confidence


def test_an_incomplete_run_still_fails_closed():
    gate = parse_gate("aime25.average_at_n >= 0.4 @ 0.95")
    summary = {"average_at_n": 0.9, "generations": 1000, "complete": False, "incomplete": "1 missing"}
    result = evaluate_gate(gate, {"aime25": summary})
    assert (result.decision, result.passed) == ("FAIL", False)
    assert "gates fail closed" in result.reason


RIGHT = {p["problem"]: f"\\boxed{{{p['answer']}}}" for p in TINY_PROBLEMS}


@pytest.mark.parametrize(
    ("answers", "gate", "verdict", "status", "why"),
    [
        # 4 problems x 8 generations = 32 draws: the interval is the value +- 0.2401
        (RIGHT, "aime25.average_at_n >= 0.4 @ 0.95", "PASS", 0, "1.0000, 95% interval [0.7599, 1.0000]"),
        ({}, "aime25.average_at_n >= 0.4 @ 0.95", "FAIL", 1, "0.0000, 95% interval [0.0000, 0.2401]"),
        (
            dict(list(RIGHT.items())[:2]),
            "aime25.average_at_n >= 0.4 @ 0.95",
            "UNDECIDED",
            1,
            "0.5000, 95% interval [0.2599, 0.7401] over 32 draws (Hoeffding); holds 0.4: undecided",
        ),
    ],
)
def test_a_run(run_suite, pytester, answers, gate, verdict, status, why):
    with OpenAITestServer(ServerConfig(answers=answers, answer="no idea")) as server:
        result, path = run_suite(
            f"--endpoint={server.url}", "--val-n=8", f"--agenteval-gate={gate}", "--junitxml=junit.xml"
        )
    assert result.ret == status, result.stdout.str()[-2000:]
    line = next(x for x in result.outlines if x.startswith("gate "))
    assert line.startswith(f"gate {verdict}  {gate}  ({why}")
    _, (summary,) = read_results(path)
    (found,) = summary["gates"]
    assert (found["decision"], found["confidence"], found["draws"]) == (verdict, 0.95, 32)
    assert found["passed"] is (verdict == "PASS")
    properties = {
        p.get("name"): p.get("value")
        for p in ET.parse(pytester.path / "junit.xml").getroot().iter("property")
    }
    assert properties["agenteval.gate.1"].startswith(f"{verdict} {gate} (")
    assert properties["agenteval.gate.1.decision"] == verdict
    assert json.loads(properties["agenteval.gate.1.interval"]) == pytest.approx(found["interval"], abs=1e-4)


def test_the_option_and_the_point_comparison_line(run_suite):
    """--agenteval-gate-confidence sets the level of a gate without one; without it, the
    terminal says the gate is a point comparison."""
    with OpenAITestServer(ServerConfig(answers=RIGHT)) as server:
        decided, _ = run_suite(
            f"--endpoint={server.url}",
            "--val-n=8",
            "--agenteval-gate=aime25.average_at_n >= 0.4",
            "--agenteval-gate-confidence=0.9",
        )
        point, _ = run_suite(
            f"--endpoint={server.url}", "--val-n=8", "--agenteval-gate=aime25.average_at_n >= 0.4"
        )
    assert decided.ret == 0
    assert any(
        x.startswith("gate PASS  aime25.average_at_n >= 0.4  (1.0000, 90% interval") for x in decided.outlines
    )
    assert point.ret == 0
    assert (
        "gate PASS  aime25.average_at_n >= 0.4  (1.0000 >= 0.4 holds, a point comparison)" in point.outlines
    )


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ("--agenteval-gate=aime25.mean_turns >= 2 @ 0.95",),
            "ERROR: --agenteval-gate 'aime25.mean_turns >= 2 @ 0.95': mean_turns is not a mean of bounded*",
        ),
        (("--agenteval-gate-confidence=2",), "*--agenteval-gate-confidence*between 0 and 1*"),
    ],
)
def test_refused_at_start_up(run_suite, args, error):
    with OpenAITestServer(ServerConfig(answers=RIGHT)) as server:
        result, _ = run_suite(f"--endpoint={server.url}", *args)
        assert server.stats()["total_requests"] == 0
    assert result.ret == 4
    result.stderr.fnmatch_lines([error])
