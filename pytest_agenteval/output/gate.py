"""Threshold gates: `aime25.average_at_n >= 0.30`, checked against the run's summaries."""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping
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
_GATE = re.compile(
    r"^\s*(?P<suite>[A-Za-z_][\w-]*)\.(?P<metric>[\w-]+(?:\.[\w>-]+)*)\s*"
    r"(?P<op>>=|<=|==|!=|>|<)\s*(?P<value>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?P<pct>%?)\s*$"
)


class GateError(ValueError):
    """A gate expression that cannot be parsed; the message is one line with the fix."""


@dataclass(frozen=True)
class Gate:
    expression: str
    suite: str
    metric: str  # dotted path inside the suite's summary
    op: str
    threshold: float


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
    match = _GATE.match(expression)
    if not match:
        raise GateError(
            f"--agenteval-gate {expression!r}: expected SUITE.METRIC OP NUMBER, "
            'e.g. "aime25.average_at_n >= 0.30" (OP is one of >= > <= < == !=)'
        )
    threshold = float(match["value"]) / (100 if match["pct"] else 1)
    return Gate(expression.strip(), match["suite"], match["metric"], match["op"], threshold)


def _matches(template: str, metric: str) -> bool:
    """`pass_at_k.<k>` matches `pass_at_k.4`; `judge.<path>` any path under `judge`."""
    want, got = template.split("."), metric.split(".")
    if want[-1] == "<path>":
        return len(got) >= len(want) and all(
            w == g or w.startswith("<") for w, g in zip(want[:-1], got, strict=False)
        )
    return len(want) == len(got) and all(w == g or w.startswith("<") for w, g in zip(want, got, strict=True))


def check_metric_name(gate: Gate, known: Mapping[str, tuple[str, ...]]) -> None:
    """For suites whose numeric fields are known up front (suite -> templates, see
    tasks.registry), catch typos and fields that are not numbers at start-up."""
    names = known.get(gate.suite)
    if names is None or any(_matches(template, gate.metric) for template in names):
        return
    head = gate.metric.split(".")[0]
    if any(template.split(".")[0] == head for template in names):
        problem = f"{gate.metric!r} is not a number of {gate.suite}"
    else:
        problem = f"{gate.suite} has no metric {head!r}"
    raise GateError(
        f"--agenteval-gate {gate.expression!r}: {problem}; its numeric metrics: {', '.join(names)}"
    )


def check_pass_at_k(gate: Gate, samples: int) -> None:
    """pass_at_k.K exists for K = 1..N only: a K above the run's N never has a value."""
    parts = gate.metric.split(".")
    if parts[0] != "pass_at_k" or len(parts) != 2 or not parts[1].isdigit():
        return
    k = int(parts[1])
    if k < 1:
        raise GateError(f"--agenteval-gate {gate.expression!r}: k starts at 1; use a k within 1-{samples}")
    if k > samples:
        raise GateError(
            f"--agenteval-gate {gate.expression!r}: k={k} but {gate.suite} runs N={samples} generations "
            f"per problem; use a k within 1-{samples}, or raise --val-n to at least {k}"
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
