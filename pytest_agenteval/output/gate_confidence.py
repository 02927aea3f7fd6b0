"""Gates with a stated confidence (`aime25.average_at_n >= 0.4 @ 0.95`): which metrics can
carry one, and the decision by an interval at that confidence: PASS when it lies wholly where
the gate holds, FAIL when wholly where it does not, UNDECIDED while it holds the threshold.
`output/gate.py` parses the gates and builds their results from what this module says."""

from __future__ import annotations

import operator
import re
from collections.abc import Mapping
from typing import Any

# Metrics that are a mean of bounded draws, each with the summary field that counts its
# draws: what a confidence can be stated for (`<x>` matches one path part).
CONFIDENCE_METRICS: dict[str, str] = {
    "average_at_n": "generations",
    "format_rate": "generations",
    "pass_at_n": "problems",
    "maj_at_n": "problems",
    "pass_at_k.<k>": "problems",
    "accuracy": "scored|items",  # GAIA counts the scored items, BFCL every item
    "per_category.<c>.accuracy": "per_category.<c>.total",
    "per_level.<l>.accuracy": "per_level.<l>.total",
}
_SIDES = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}


def refusal(expression: str, metric: str, op: str, two_models: bool) -> str | None:
    """Why a gate cannot carry a confidence (one line with the fix), or None: it can. A gate
    comparing two models may carry one for `--agenteval-sequential`'s paired draws; without
    it, `paired_level_refusal` refuses it at start-up."""
    if op not in _SIDES:
        return (
            f"--agenteval-gate {expression!r}: an interval can show {metric} above or below a "
            f"number, never {'equal' if op == '==' else 'unequal'} to it; use >=, >, <= or <"
        )
    if draws_field(metric) is None:
        return (
            f"--agenteval-gate {expression!r}: {metric} is not a mean of bounded draws, so no "
            f"interval decides it; a confidence needs one of {', '.join(CONFIDENCE_METRICS)} (or drop "
            "the level for a point comparison)"
        )
    return None


def draws_field(metric: str) -> str | None:
    """The summary path(s) counting the draws behind `metric` (`a|b`: the first present), or
    None: it is not a mean of bounded draws."""
    got = metric.split(".")
    for template, field in CONFIDENCE_METRICS.items():
        want = template.split(".")
        if len(want) == len(got) and all(w == g or w.startswith("<") for w, g in zip(want, got, strict=True)):
            if template.startswith("pass_at_k") and not got[1].isdigit():
                return None
            slot = next((g for w, g in zip(want, got, strict=True) if w.startswith("<")), "")
            return re.sub(r"<\w+>", slot, field)
    return None


def _count(summary: Mapping[str, Any], path: str) -> int:
    value: Any = summary
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else 0


def decide(
    metric: str, op: str, threshold: float, confidence: float, value: float, summary: Mapping[str, Any]
) -> tuple[str, tuple[float, float] | None, int, str]:
    """(PASS, FAIL or UNDECIDED; the interval; the draws; the reason) of a complete run's gate.
    The run looks once, at its end, so the interval is Hoeffding's for a mean of independent
    draws in [0, 1] with their own means (each problem its own rate): value +- sqrt(log(2 /
    alpha) / (2 n)). The betting confidence sequence needs draws of one mean (problems drawn
    at random), which a complete run's are not."""
    from pytest_agenteval.stats.sequential import FAIL, PASS, UNDECIDED, hoeffding_interval

    fields = (draws_field(metric) or "").split("|")
    draws = next((n for n in (_count(summary, f) for f in fields) if n > 0), 0)
    if draws < 1:
        why = f"no count of the draws behind {metric} ({' or '.join(fields)}) in the summary"
        return FAIL, None, 0, f"{why}: gates fail closed"
    low, high = hoeffding_interval(value, draws, 1 - confidence)
    holds = [_SIDES[op](bound, threshold) for bound in (low, high)]  # the gate's side is a half-line
    decision = PASS if all(holds) else FAIL if not any(holds) else UNDECIDED
    level = f"{confidence:.0%}" if round(confidence * 100, 6).is_integer() else f"{confidence:g}"
    found = f"{value:.4f}, {level} interval [{low:.4f}, {high:.4f}] over {draws:,} draws (Hoeffding)"
    claim = {
        PASS: f"wholly {op} {threshold:g}",
        FAIL: f"wholly on the other side of {threshold:g}",
        UNDECIDED: f"holds {threshold:g}: undecided, the data cannot tell",
    }[decision]
    return decision, (low, high), draws, f"{found}; {claim}"


def paired_level_refusal(expression: str) -> str:
    """A level on a gate comparing two models outside sequential mode: one line."""
    return (
        f"--agenteval-gate {expression!r}: a confidence on a gate comparing two models is decided by "
        "paired draws: add --agenteval-sequential, or drop the '@ LEVEL' (its paired 95% bootstrap decides)"
    )
