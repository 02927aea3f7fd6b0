"""Threshold gates: `aime25.average_at_n >= 0.30`, checked against the run's summaries; in a
sweep of models, gates that name them: `aime25[step-200].average_at_n >= 0.30` and
`aime25[step-200].average_at_n >= aime25[base].average_at_n + 0.02`, which must also hold
in a paired comparison over the problems both models ran (`evaluate_sweep_gate`)."""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
    "==": operator.eq,
    "!=": operator.ne,
}
_NUMBER = r"(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_SUITE, _LABEL = r"[A-Za-z_][\w-]*", r"[A-Za-z0-9._-]+"  # a label as models.sweep allows it
_GATE = re.compile(
    rf"^\s*(?P<suite>{_SUITE})\.(?P<metric>[\w-]+(?:\.[\w>-]+)*)\s*"
    rf"(?P<op>>=|<=|==|!=|>|<)\s*(?P<value>[-+]?{_NUMBER})(?P<pct>%?)\s*$"
)
_MODEL_GATE = re.compile(
    rf"^\s*(?P<suite>{_SUITE})\[(?P<label>{_LABEL})\]\.(?P<metric>[\w-]+(?:\.[\w>-]+)*)\s*"
    r"(?P<op>>=|<=|==|!=|>|<)\s*(?P<right>.*?)\s*$"
)
_RIGHT_NUMBER = re.compile(rf"^(?P<value>[-+]?{_NUMBER})(?P<pct>%?)$")
# the right-hand metric is matched lazily, so `...average_at_n-0.02` reads as a margin of -0.02
_RIGHT_MODEL = re.compile(
    rf"^(?P<suite>{_SUITE})\[(?P<label>{_LABEL})\]\.(?P<metric>[\w-]+?(?:\.[\w>-]+?)*?)"
    rf"(?:\s*(?P<sign>[-+])\s*(?P<margin>{_NUMBER})(?P<pct>%?))?$"
)
_MODEL_FORMS = (
    "SUITE[MODEL].METRIC OP NUMBER or SUITE[MODEL].METRIC OP SUITE[MODEL].METRIC [+|- NUMBER], "
    'e.g. "aime25[step-200].average_at_n >= aime25[base].average_at_n + 0.02"'
)


class GateError(ValueError):
    """A gate expression that cannot be parsed; the message is one line with the fix."""


@dataclass(frozen=True)
class Operand:
    """The right-hand side of a gate comparing two models: SUITE[LABEL].METRIC."""

    suite: str
    label: str
    metric: str

    def __str__(self) -> str:
        return f"{self.suite}[{self.label}].{self.metric}"


@dataclass(frozen=True)
class Gate:
    expression: str
    suite: str
    metric: str  # dotted path inside the suite's summary
    op: str
    threshold: float  # the number; with `other`, the margin: left OP other + threshold
    label: str | None = None  # the model the left side names (a sweep); None: none named
    other: Operand | None = None  # the other model's metric, when the gate compares two

    @property
    def labels(self) -> tuple[str, ...]:
        """The models the gate names, left first."""
        return tuple(x for x in (self.label, self.other.label if self.other else None) if x is not None)

    @property
    def left(self) -> str:
        return f"{self.suite}[{self.label}].{self.metric}" if self.label else f"{self.suite}.{self.metric}"


@dataclass(frozen=True)
class GateResult:
    gate: Gate
    passed: bool
    value: float | None
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "gate": self.gate.expression,
            "passed": self.passed,
            "value": self.value,
            "reason": self.reason,
        }


def parse_gate(expression: str) -> Gate:
    if "[" in expression:
        return _parse_model_gate(expression)
    match = _GATE.match(expression)
    if not match:
        raise GateError(
            f"--agenteval-gate {expression!r}: expected SUITE.METRIC OP NUMBER, "
            'e.g. "aime25.average_at_n >= 0.30" (OP is one of >= > <= < == !=)'
        )
    threshold = float(match["value"]) / (100 if match["pct"] else 1)
    return Gate(expression.strip(), match["suite"], match["metric"], match["op"], threshold)


def _parse_model_gate(expression: str) -> Gate:
    def error(problem: str) -> GateError:
        return GateError(f"--agenteval-gate {expression!r}: {problem}")

    match = _MODEL_GATE.match(expression)
    number = _RIGHT_NUMBER.match(match["right"]) if match else None
    model = _RIGHT_MODEL.match(match["right"]) if match and number is None else None
    if match is None or (number is None and model is None):
        raise error(f"expected {_MODEL_FORMS} (OP is one of >= > <= <; MODEL is a label of --model-path)")
    suite, label, metric, op = match["suite"], match["label"], match["metric"], match["op"]
    if number is not None:
        threshold = float(number["value"]) / (100 if number["pct"] else 1)
        return Gate(expression.strip(), suite, metric, op, threshold, label)
    other = Operand(model["suite"], model["label"], model["metric"])
    if op in ("==", "!="):
        raise error(
            f"{op} between two models cannot be decided by a paired comparison (its interval can show "
            "a difference, never an equality); use >= or <= with a margin, e.g. "
            f'"{suite}[{label}].{metric} >= {other} - 0.02"'
        )
    if other.suite != suite:
        raise error(
            f"compares {suite} with {other.suite}: a paired comparison needs the same problems on both "
            f'sides; name one suite on both, e.g. "{suite}[{label}].{metric} >= {suite}[{other.label}].'
            f'{other.metric}"'
        )
    if (other.label, other.metric) == (label, metric):
        raise error(
            f"compares {other} with itself; name another model on the right, e.g. "
            f'"{suite}[{label}].{metric} >= {suite}[base].{metric} + 0.02"'
        )
    margin = float(model["margin"] or 0) / (100 if model["pct"] else 1) * (-1 if model["sign"] == "-" else 1)
    return Gate(expression.strip(), suite, metric, op, margin, label, other)


def check_gate_labels(gates: Sequence[Gate], labels: Sequence[str]) -> None:
    """At start-up, with the run's model labels known (in model order; fewer than two: not a
    sweep): a gate naming a model the run does not evaluate. The hooks turn the GateError into
    a pytest.UsageError, as for every gate check. A gate naming no model is fine in a sweep
    (it must hold for every model: `evaluate_sweep_gate`)."""
    for gate in gates:
        for label in gate.labels:
            if len(labels) < 2:
                raise GateError(
                    f"--agenteval-gate {gate.expression!r}: names the model {label!r}, but this run "
                    f"evaluates one model, not a sweep; write {gate.suite}.{gate.metric}, or pass "
                    "--model-path once per model of the sweep"
                )
            if label not in labels:
                raise GateError(
                    f"--agenteval-gate {gate.expression!r}: no model labelled {label!r} in this sweep; "
                    f"its labels: {', '.join(labels)}"
                )


def _matches(template: str, metric: str) -> bool:
    """`pass_at_k.<k>` matches `pass_at_k.4`; `judge.<path>` any path under `judge`."""
    want, got = template.split("."), metric.split(".")
    if want[-1] == "<path>":
        return len(got) >= len(want) and all(
            w == g or w.startswith("<") for w, g in zip(want[:-1], got, strict=False)
        )
    return len(want) == len(got) and all(w == g or w.startswith("<") for w, g in zip(want, got, strict=True))


def _metrics(gate: Gate) -> tuple[str, ...]:
    """The metrics a gate reads (both sides' when it compares two models; one suite)."""
    return (gate.metric,) if gate.other is None else tuple(dict.fromkeys((gate.metric, gate.other.metric)))


def check_metric_name(gate: Gate, known: Mapping[str, tuple[str, ...]]) -> None:
    """For suites whose numeric fields are known up front (suite -> templates, see
    tasks.registry), catch typos and fields that are not numbers at start-up."""
    names = known.get(gate.suite)
    if names is None:
        return
    for metric in _metrics(gate):
        if any(_matches(template, metric) for template in names):
            continue
        head = metric.split(".")[0]
        if any(template.split(".")[0] == head for template in names):
            problem = f"{metric!r} is not a number of {gate.suite}"
        else:
            problem = f"{gate.suite} has no metric {head!r}"
        raise GateError(
            f"--agenteval-gate {gate.expression!r}: {problem}; its numeric metrics: {', '.join(names)}"
        )


def check_pass_at_k(gate: Gate, samples: int) -> None:
    """pass_at_k.K exists for K = 1..N only: a K above the run's N never has a value."""
    for metric in _metrics(gate):
        parts = metric.split(".")
        if parts[0] != "pass_at_k" or len(parts) != 2 or not parts[1].isdigit():
            continue
        k = int(parts[1])
        if k < 1:
            raise GateError(
                f"--agenteval-gate {gate.expression!r}: k starts at 1; use a k within 1-{samples}"
            )
        if k > samples:
            raise GateError(
                f"--agenteval-gate {gate.expression!r}: k={k} but {gate.suite} runs N={samples} "
                f"generations per problem; use a k within 1-{samples}, or raise --val-n to at least {k}"
            )


def _resolve(summary: Mapping[str, Any], path: str) -> Any:
    value: Any = summary
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def evaluate_gate(gate: Gate, summaries: Mapping[str, Mapping[str, Any]]) -> GateResult:
    """Fail closed: a missing suite, a missing, n/a (null: nothing scored) or non-numeric
    metric, or an incomplete run fails the gate, with a reason that says which."""
    summary = summaries.get(gate.suite)
    if summary is None:
        return GateResult(gate, False, None, f"no results for suite {gate.suite}")
    value = _resolve(summary, gate.metric)
    if value is None and summary.get("not_scored"):  # a metric with nothing behind it
        return GateResult(
            gate, False, None, f"{gate.metric} is n/a ({summary['not_scored']}): gates fail closed"
        )
    if value is None:
        return GateResult(
            gate, False, None, f"{gate.metric} is n/a (no value in the summary): gates fail closed"
        )
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return GateResult(gate, False, None, f"{gate.metric} is {value!r}, not a number")
    number = float(value)
    if not summary.get("complete", False):
        why = summary.get("incomplete")
        return GateResult(
            gate, False, number, f"run incomplete{f' ({why})' if why else ''}: gates fail closed"
        )
    passed = _OPERATORS[gate.op](number, gate.threshold)
    verdict = "holds" if passed else "does not hold"
    return GateResult(gate, passed, number, f"{number:.4f} {gate.op} {gate.threshold:g} {verdict}")
