"""Gates that name models (`aime25[step-200].average_at_n >= aime25[base].average_at_n + 0.02`):
the grammar, the refusals at parse time and the start-up check of the labels."""

from __future__ import annotations

import pytest

from pytest_agenteval.output.gate import (
    GateError,
    Operand,
    check_gate_labels,
    check_metric_name,
    check_pass_at_k,
    parse_gate,
)


@pytest.mark.parametrize(
    ("expression", "label", "metric", "op", "threshold", "other"),
    [
        ("aime25[step-200].average_at_n >= 0.3", "step-200", "average_at_n", ">=", 0.3, None),
        ("aime25[step-200].average_at_n>=30%", "step-200", "average_at_n", ">=", 0.3, None),
        ("aime25[v1.5_a].pass_at_k.4>0.5", "v1.5_a", "pass_at_k.4", ">", 0.5, None),
        (
            "aime25[step-200].average_at_n >= aime25[base].average_at_n + 0.02",
            "step-200",
            "average_at_n",
            ">=",
            0.02,
            Operand("aime25", "base", "average_at_n"),
        ),
        (
            "aime25[step-200].average_at_n >= aime25[base].average_at_n - 0.02",
            "step-200",
            "average_at_n",
            ">=",
            -0.02,
            Operand("aime25", "base", "average_at_n"),
        ),
        (
            "aime25[step-200].average_at_n>=aime25[base].average_at_n-0.02",
            "step-200",
            "average_at_n",
            ">=",
            -0.02,
            Operand("aime25", "base", "average_at_n"),
        ),
        (
            "aime25[step-200].average_at_n >= aime25[base].pass_at_k.4 + 2%",
            "step-200",
            "average_at_n",
            ">=",
            0.02,
            Operand("aime25", "base", "pass_at_k.4"),
        ),
        (
            "aime25[b].pass_at_k.4 < aime25[a].pass_at_k.4",
            "b",
            "pass_at_k.4",
            "<",
            0.0,
            Operand("aime25", "a", "pass_at_k.4"),
        ),
        (
            "gaia[b].drop_rates.1->2 <= gaia[a].drop_rates.1->2 - 0.1",
            "b",
            "drop_rates.1->2",
            "<=",
            -0.1,
            Operand("gaia", "a", "drop_rates.1->2"),
        ),
    ],
)
def test_parse_a_gate_that_names_models(
    expression: str, label: str, metric: str, op: str, threshold: float, other: Operand | None
) -> None:
    gate = parse_gate(expression)
    assert (gate.label, gate.metric, gate.op, gate.threshold, gate.other) == (
        label,
        metric,
        op,
        pytest.approx(threshold),
        other,
    )


def test_a_gate_without_a_model_names_none() -> None:
    gate = parse_gate("aime25.average_at_n >= 0.3")
    assert (gate.label, gate.other, gate.labels) == (None, None, ())
    assert parse_gate("aime25[s2].average_at_n >= aime25[s1].average_at_n").labels == ("s2", "s1")


EXAMPLE = 'e.g. "aime25[step-200].average_at_n >= aime25[base].average_at_n + 0.02"'


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("aime25[].average_at_n >= 0.3", "expected SUITE[MODEL].METRIC OP NUMBER"),
        ("aime25[a b].average_at_n >= 0.3", "expected SUITE[MODEL].METRIC OP NUMBER"),
        ("aime25[a].average_at_n >= aime25[b]", "expected SUITE[MODEL].METRIC OP NUMBER"),
        ("aime25[a].average_at_n >= aime25[b].average_at_n * 2", "expected SUITE[MODEL].METRIC OP NUMBER"),
        ("aime25[a].average_at_n >= high", "expected SUITE[MODEL].METRIC OP NUMBER"),
        (
            "aime25[a].average_at_n == aime25[b].average_at_n",
            "== between two models cannot be decided by a paired comparison",
        ),
        (
            "aime25[a].average_at_n != aime25[b].average_at_n",
            "!= between two models cannot be decided by a paired comparison",
        ),
        (
            "aime25[a].average_at_n >= gsm8k[b].average_at_n",
            "compares aime25 with gsm8k: a paired comparison needs the same problems",
        ),
        ("aime25[a].average_at_n >= aime25[a].average_at_n", "compares aime25[a].average_at_n with itself"),
    ],
)
def test_a_bad_model_gate_is_one_line_with_an_example(expression: str, message: str) -> None:
    with pytest.raises(GateError) as info:
        parse_gate(expression)
    text = str(info.value)
    assert message in text and "\n" not in text
    assert text.startswith(f"--agenteval-gate {expression!r}: ")
    assert "e.g. " in text


def test_the_grammar_error_shows_both_forms() -> None:
    with pytest.raises(GateError) as info:
        parse_gate("aime25[a].average_at_n => 0.3")
    assert str(info.value) == (
        "--agenteval-gate 'aime25[a].average_at_n => 0.3': expected SUITE[MODEL].METRIC OP NUMBER or "
        "SUITE[MODEL].METRIC OP SUITE[MODEL].METRIC [+|- NUMBER], "
        f"{EXAMPLE} (OP is one of >= > <= <; MODEL is a label of --model-path)"
    )


def test_both_sides_metric_names_are_checked() -> None:
    known = {"aime25": ("average_at_n", "pass_at_k.<k>")}
    check_metric_name(parse_gate("aime25[a].average_at_n >= aime25[b].pass_at_k.2"), known)
    with pytest.raises(GateError, match="aime25 has no metric 'averge_at_n'"):
        check_metric_name(parse_gate("aime25[a].average_at_n >= aime25[b].averge_at_n"), known)


def test_both_sides_pass_at_k_are_checked_against_n() -> None:
    check_pass_at_k(parse_gate("aime25[a].pass_at_k.4 >= aime25[b].pass_at_k.4"), 4)
    with pytest.raises(GateError, match="k=8 but aime25 runs N=4 generations"):
        check_pass_at_k(parse_gate("aime25[a].pass_at_k.4 >= aime25[b].pass_at_k.8"), 4)


LABELS = ["base", "step-100", "step-200"]


@pytest.mark.parametrize(
    ("expressions", "labels", "error"),
    [
        (["aime25[step-200].average_at_n >= aime25[base].average_at_n + 0.02"], LABELS, None),
        (["aime25[step-200].average_at_n >= 0.3", "aime25.average_at_n >= 0.1"], LABELS, None),
        (["aime25.average_at_n >= 0.1"], [], None),
        (
            ["aime25[step-20].average_at_n >= 0.3"],
            LABELS,
            "--agenteval-gate 'aime25[step-20].average_at_n >= 0.3': no model labelled 'step-20' in this "
            "sweep; its labels: base, step-100, step-200",
        ),
        (
            ["aime25[step-200].average_at_n >= aime25[bsae].average_at_n"],
            LABELS,
            "--agenteval-gate 'aime25[step-200].average_at_n >= aime25[bsae].average_at_n': no model "
            "labelled 'bsae' in this sweep; its labels: base, step-100, step-200",
        ),
        (
            ["aime25[base].average_at_n >= 0.3"],
            [],
            "--agenteval-gate 'aime25[base].average_at_n >= 0.3': names the model 'base', but this run "
            "evaluates one model, not a sweep; write aime25.average_at_n, or pass --model-path once per "
            "model of the sweep",
        ),
        (
            ["aime25[base].average_at_n >= 0.3"],
            ["base"],
            "--agenteval-gate 'aime25[base].average_at_n >= 0.3': names the model 'base', but this run "
            "evaluates one model, not a sweep; write aime25.average_at_n, or pass --model-path once per "
            "model of the sweep",
        ),
    ],
)
def test_check_gate_labels(expressions: list[str], labels: list[str], error: str | None) -> None:
    gates = [parse_gate(e) for e in expressions]
    if error is None:
        check_gate_labels(gates, labels)
        return
    with pytest.raises(GateError) as info:
        check_gate_labels(gates, labels)
    assert str(info.value) == error
