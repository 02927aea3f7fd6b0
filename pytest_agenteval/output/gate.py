"""Threshold gates: `aime25.average_at_n >= 0.30`, checked against the run's summaries; in a
sweep of models, gates that name them: `aime25[step-200].average_at_n >= 0.30` and
`aime25[step-200].average_at_n >= aime25[base].average_at_n + 0.02`, which must also hold
in a paired comparison over the problems both models ran (`evaluate_sweep_gate`).

A threshold gate with a confidence, `aime25.average_at_n >= 0.4 @ 0.95` (or every threshold
gate under `--agenteval-gate-confidence`), decides by an interval instead of the point:
PASS when it lies wholly where the gate holds, FAIL when wholly where it does not,
UNDECIDED otherwise (`output/gate_confidence.py`)."""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pytest_agenteval.output.gate_confidence import decide, refusal
from pytest_agenteval.stats.paired import HEADLINE, paired_bootstrap, too_few
from pytest_agenteval.stats.pass_at_k import unbiased_pass_at_k

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
_LEVEL = re.compile(rf"^(?P<body>.*?)\s*@\s*(?P<level>{_NUMBER})(?P<pct>%?)\s*$")
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

    @property
    def model(self) -> str:
        return f"{self.suite}[{self.label}]"

    def __str__(self) -> str:
        return f"{self.model}.{self.metric}"


@dataclass(frozen=True)
class Gate:
    expression: str
    suite: str
    metric: str  # dotted path inside the suite's summary
    op: str
    threshold: float  # the number; with `other`, the margin: left OP other + threshold
    label: str | None = None  # the model the left side names (a sweep); None: none named
    other: Operand | None = None  # the other model's metric, when the gate compares two
    confidence: float | None = None  # `@ 0.95`: decided by an interval; None: by the point

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
    value: float | None  # the left side's number
    reason: str
    # a gate comparing two models: the other's number, the point delta (value - other_value),
    # the paired bootstrap's 95% interval of it and over how many shared problems
    other_value: float | None = None
    delta: float | None = None
    ci95: tuple[float, float] | None = None
    paired_problems: int | None = None
    # a gate with a confidence: PASS, FAIL or UNDECIDED, the interval at that confidence and
    # the draws behind it (UNDECIDED is not passed: it exits 1, as a gate that does not hold)
    decision: str | None = None
    interval: tuple[float, float] | None = None
    draws: int | None = None
    point: bool = False  # decided by comparing the point estimate alone (no interval): say so
    # --agenteval-sequential: decided by the betting confidence sequence over the draws in
    # order (plugin/sequential.py); `draws` are the draws the decision used
    sequential: bool = False

    @property
    def verdict(self) -> str:
        """PASS, FAIL or (a gate with a confidence only) UNDECIDED."""
        return self.decision or ("PASS" if self.passed else "FAIL")

    def as_dict(self) -> dict[str, Any]:
        found = {
            "gate": self.gate.expression,
            "passed": self.passed,
            "value": self.value,
            "reason": self.reason,
        }
        extra = {
            "other_value": self.other_value,
            "delta": self.delta,
            "ci95": list(self.ci95) if self.ci95 else None,
            "paired_problems": self.paired_problems,
            "decision": self.decision,
            "confidence": self.gate.confidence,
            "interval": list(self.interval) if self.interval else None,
            "draws": self.draws,
            "sequential": self.sequential or None,
        }
        return found | {key: value for key, value in extra.items() if value is not None}


def parse_gate(expression: str) -> Gate:
    level = _LEVEL.match(expression)
    if level is not None:
        confidence = float(level["level"]) / (100 if level["pct"] else 1)
        if not 0 < confidence < 1:
            raise GateError(
                f"--agenteval-gate {expression!r}: a confidence is within (0, 1), e.g. "
                f'"{level["body"].strip()} @ 0.95" (or @ 95%)'
            )
        gate = parse_gate(level["body"])
        return with_confidence(replace(gate, expression=expression.strip()), confidence, explicit=True)
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


def with_confidence(gate: Gate, confidence: float | None, explicit: bool = False) -> Gate:
    """The gate decided at `confidence` (a gate's own `@ LEVEL` wins over the option's, which
    sets threshold gates only: two models keep their paired bootstrap); a GateError where it
    cannot be (output/gate_confidence.py says which). `explicit`: the level is the gate's own."""
    if confidence is None or (gate.confidence is not None and not explicit):
        return gate
    if gate.other is not None and not explicit:
        return gate
    problem = refusal(gate.expression, gate.metric, gate.op, gate.other is not None)
    if problem is not None:
        raise GateError(problem)
    return replace(gate, confidence=confidence)


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


def _read(summary: Mapping[str, Any], metric: str, model: str = "") -> tuple[float | None, str | None]:
    """(the metric's number, why a gate on it fails closed or None): n/a (null: nothing
    scored), missing, not a number, or a run that is not complete. `model`, in a sweep,
    names whose summary it is (`aime25[base]`)."""
    name, run = (f"{model}.{metric}", f"{model} run") if model else (metric, "run")
    value = _resolve(summary, metric)
    if value is None and summary.get("not_scored"):  # a metric with nothing behind it
        return None, f"{name} is n/a ({summary['not_scored']}): gates fail closed"
    if value is None:
        return None, f"{name} is n/a (no value in the summary): gates fail closed"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None, f"{name} is {value!r}, not a number"
    if not summary.get("complete", False):
        why = summary.get("incomplete")
        return float(value), f"{run} incomplete{f' ({why})' if why else ''}: gates fail closed"
    return float(value), None


def evaluate_gate(gate: Gate, summaries: Mapping[str, Mapping[str, Any]]) -> GateResult:
    """Fail closed: a missing suite, a missing, n/a (null: nothing scored) or non-numeric
    metric, or an incomplete run fails the gate, with a reason that says which."""
    if gate.labels:  # summaries keyed by suite alone belong to one model: not a sweep
        return GateResult(gate, False, None, "names a model, but this run is not a sweep: gates fail closed")
    summary = summaries.get(gate.suite)
    if summary is None:
        return GateResult(gate, False, None, f"no results for suite {gate.suite}")
    number, problem = _read(summary, gate.metric)
    if problem is not None or number is None:
        return GateResult(gate, False, number, problem or "", decision="FAIL" if gate.confidence else None)
    if gate.confidence is not None:
        decision, interval, draws, reason = decide(
            gate.metric, gate.op, gate.threshold, gate.confidence, number, summary
        )
        found = GateResult(gate, decision == "PASS", number, reason, decision=decision, interval=interval)
        return replace(found, draws=draws or None)
    passed = _OPERATORS[gate.op](number, gate.threshold)
    verdict = "holds" if passed else "does not hold"
    reason = f"{number:.4f} {gate.op} {gate.threshold:g} {verdict}"
    return GateResult(gate, passed, number, reason, point=True)


# The paired comparison needs a per-problem score whose mean over problems is the metric,
# computed from each generation's correctness: `scores[(suite, label)][problem] = [bool, ...]`.
PAIRED_METRICS = "average_at_n, pass_at_n and pass_at_k.K"
Scores = Mapping[str, Sequence[bool]]


def _per_problem(suite: str, metric: str) -> Callable[[Sequence[bool]], float] | None:
    """The per-problem score of `metric`, or None: it cannot be paired from correctness alone
    (maj_at_n needs the answers, format_rate the formats). A suite whose headline is
    `accuracy` (stats.paired.HEADLINE: BFCL, GAIA) scores it as `--agenteval-compare` does."""
    if metric == "average_at_n" or (metric == "accuracy" and HEADLINE.get(suite) == "accuracy"):
        return lambda correct: sum(correct) / len(correct)
    if metric == "pass_at_n":
        return lambda correct: float(any(correct))
    parts = metric.split(".")
    if parts[0] == "pass_at_k" and len(parts) == 2 and parts[1].isdigit() and int(parts[1]) >= 1:
        k = int(parts[1])
        return lambda correct: unbiased_pass_at_k(len(correct), sum(correct), k)
    return None


def _problem_scores(
    score: Callable[[Sequence[bool]], float], metric: str, model: str, correct: Scores
) -> tuple[dict[str, float] | None, str | None]:
    """Problem id -> its score (problems with generations), or None and why not."""
    parts = metric.split(".")
    if parts[0] == "pass_at_k":  # unbiased pass@k is defined for k <= n only
        short = min((len(c) for c in correct.values() if c), default=None)
        if short is not None and short < int(parts[1]):
            return None, f"{metric} needs {parts[1]} generations of every problem, {model} has {short}"
    return {str(p): score(list(c)) for p, c in correct.items() if c}, None


def _holds(op: str, number: float, bound: float) -> bool:
    """`number OP bound`, with the float noise of a subtraction (0.3 - 0.1 - 0.2) rounded off."""
    return _OPERATORS[op](round(number - bound, 12), 0.0)


def evaluate_sweep_gate(
    gate: Gate,
    summaries_by_key: Mapping[tuple[str, str], Mapping[str, Any]],
    scores_by_key: Mapping[tuple[str, str], Scores],
    seed: int = 0,
) -> GateResult:
    """A gate in a sweep (summaries and per-problem correctness keyed by (suite, label)).
    One model against a number: as `evaluate_gate`. No model named: it must hold for every
    model. Two models: the point estimates must satisfy `left OP right + margin` AND the
    paired bootstrap of left - right over the problems both ran must agree (its interval's
    lower bound at least / above the margin for >= / >, its upper bound at most / below it for
    <= / <);
    metrics without a per-problem score are compared by point only ("not paired"). Fails
    closed on a missing model or suite, an n/a value, an incomplete run, or too few shared
    problems."""
    if gate.label is None:
        return _every_model(gate, summaries_by_key)
    left = f"{gate.suite}[{gate.label}]"
    summary = summaries_by_key.get((gate.suite, gate.label))
    if summary is None:
        return GateResult(gate, False, None, f"no results for {left}")
    if gate.other is None:
        result = evaluate_gate(replace(gate, label=None), {gate.suite: summary})
        return replace(result, gate=gate)
    right = gate.other.model
    other = summaries_by_key.get((gate.suite, gate.other.label))
    if other is None:
        return GateResult(gate, False, None, f"no results for {right}")
    value, problem = _read(summary, gate.metric, left)
    other_value, other_problem = _read(other, gate.other.metric, right)
    if value is None or other_value is None or problem or other_problem:
        return GateResult(gate, False, value, problem or other_problem or "", other_value)
    sides = (Operand(gate.suite, gate.label, gate.metric), gate.other)
    return _compare(gate, sides, (value, other_value), scores_by_key, seed)


def _compare(
    gate: Gate,
    sides: tuple[Operand, Operand],
    values: tuple[float, float],
    scores_by_key: Mapping[tuple[str, str], Scores],
    seed: int,
) -> GateResult:
    """Both values are known and complete: the point verdict, then the paired one."""
    (this, other), (value, other_value) = sides, values
    named = (f"{this.label} {this.metric}", f"{other.label} {other.metric}")
    if this.metric == other.metric:
        named = (this.label, other.label)
    delta = round(value - other_value, 12)
    point = _holds(gate.op, delta, gate.threshold)
    measured = f"{named[0]} {value:.4f}, {named[1]} {other_value:.4f}: delta {delta:+.4f}"
    claim = f"delta {gate.op} {gate.threshold:+g} {'holds' if point else 'does not hold'}"

    def result(passed: bool, reason: str, **paired: Any) -> GateResult:
        return GateResult(gate, passed, value, reason, other_value, delta, **paired)

    scorers = [_per_problem(side.suite, side.metric) for side in sides]
    for side, score in zip(sides, scorers, strict=True):
        if score is None:
            why = f"{side.metric} has no per-problem score in the generations' correctness"
            return result(point, f"{measured}; {claim} (not paired: {why}; {PAIRED_METRICS} have)")
    per_problem = []
    for side, score in zip(sides, scorers, strict=True):
        correct = scores_by_key.get((side.suite, side.label))
        if correct is None or score is None:
            return result(False, f"{measured}; no per-problem scores of {side.model}: gates fail closed")
        found, problem = _problem_scores(score, side.metric, side.model, correct)
        if found is None:
            return result(False, f"{measured}; {problem}: gates fail closed")
        per_problem.append(found)
    shared, _, _, interval = paired_bootstrap(per_problem[1], per_problem[0], seed=seed)  # left - right
    if shared == 0:
        return result(False, f"{measured}; no problem that both models ran: gates fail closed")
    undecided = too_few(shared)
    if undecided is not None:
        return result(False, f"{measured}; {undecided}: gates fail closed", paired_problems=shared)
    low, high = interval
    measured += f", 95% interval [{low:+.4f}, {high:+.4f}] over {shared} paired problems"
    paired = dict(ci95=interval, paired_problems=shared)
    if not point:
        return result(False, f"{measured}; {claim}", **paired)
    # the interval's near bound must satisfy the gate's own operator: `>=` a margin of 0 is
    # "no worse" (two identical models, interval [0, 0], hold it), `>` 0 is "better"
    upward = gate.op in (">=", ">")
    bound, side = (low, "lower") if upward else (high, "upper")
    beyond = {">=": "at least", ">": "above", "<=": "at most", "<": "below"}[gate.op]
    if _OPERATORS[gate.op](bound, gate.threshold):
        return result(True, f"{measured}; {claim}, and so does the paired interval", **paired)
    why = f"the paired interval's {side} bound {bound:+.4f} is not {beyond} {gate.threshold:+g}"
    return result(False, f"{measured}; {claim}, but {why}: does not hold", **paired)


def _every_model(gate: Gate, summaries_by_key: Mapping[tuple[str, str], Mapping[str, Any]]) -> GateResult:
    """A gate naming no model, in a sweep: it holds when it holds for each model."""
    models = [(label, s) for (suite, label), s in summaries_by_key.items() if suite == gate.suite]
    if not models:
        return GateResult(gate, False, None, f"no results for suite {gate.suite}")
    results = [(label, evaluate_gate(gate, {gate.suite: s})) for label, s in models]
    reason = "; ".join(f"{label} {r.reason}" for label, r in results)
    return GateResult(gate, all(r.passed for _, r in results), None, f"every model: {reason}")
