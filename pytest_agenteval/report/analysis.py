"""What a report shows, computed once for every output format: one row per run and
suite, deltas against the reference run with the plugin's paired bootstrap, and the
problems whose outcome changed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_agenteval.report.runs import Run, SuiteRun
from pytest_agenteval.stats.paired import HEADLINE, paired_bootstrap, too_few


@dataclass(frozen=True)
class Delta:
    """current - reference in the headline metric, over the problems both ran."""

    points: float  # percentage points
    shared: int
    ci95_points: tuple[float, float]
    verdict: str  # "significant gain", "significant drop", "no significant change"


@dataclass(frozen=True)
class Row:
    label: str
    suite: SuiteRun
    headline: str
    value: float | None
    ci95: tuple[float, float] | None
    is_reference: bool
    best: bool
    delta: Delta | None
    stop_reasons: Mapping[str, int]
    incomplete: str | None = None  # why the run is not complete (then never ranked), else None


@dataclass(frozen=True)
class Change:
    """One problem solved (at least one correct generation) in one run and not the other."""

    problem_id: str
    now_solved: bool
    reference: Mapping[str, Any]
    current: Mapping[str, Any]


@dataclass(frozen=True)
class SuiteReport:
    name: str
    kind: str  # "math", "bfcl", "gaia" or "other"
    rows: tuple[Row, ...]
    changes: Mapping[str, tuple[Change, ...]]  # run label -> changes against the reference


def suite_kind(summary: Mapping[str, Any]) -> str:
    if "average_at_n" in summary:
        return "math"
    if "per_category" in summary:
        return "bfcl"
    if "per_level" in summary:
        return "gaia"
    return "other"


def problem_scores(suite: SuiteRun) -> dict[str, float]:
    """Fraction of correct generations per complete problem, as `--agenteval-compare` reads a baseline."""
    scores = {}
    for pid, line in suite.problems.items():
        generations = line.get("generations") or []
        if line.get("complete", True) and generations:
            scores[pid] = sum(bool(g.get("correct")) for g in generations) / len(generations)
    return scores


def _delta(reference: SuiteRun, current: SuiteRun, tolerance: float) -> Delta:
    seed = int((current.summary.get("config") or {}).get("seed", 0))  # as the plugin seeds it
    shared, old, new, (low, high) = paired_bootstrap(
        problem_scores(reference), problem_scores(current), seed=seed
    )
    diff = new - old
    undecided = too_few(shared)  # the rule --agenteval-compare applies
    if undecided:
        verdict = undecided
    elif shared and high < 0 and diff < -tolerance:
        verdict = "significant drop"
    elif shared and low > 0 and diff > tolerance:
        verdict = "significant gain"
    elif shared:
        verdict = "no significant change"
    else:
        verdict = "no shared problems"
    return Delta(round(100 * diff, 6), shared, (round(100 * low, 6), round(100 * high, 6)), verdict)


def _stop_reasons(suite: SuiteRun) -> dict[str, int]:
    counts = Counter(
        str(g.get("stop_reason")) for line in suite.problems.values() for g in line.get("generations") or ()
    )
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _changes(reference: SuiteRun, current: SuiteRun) -> tuple[Change, ...]:
    found = []
    for pid, line in current.problems.items():
        before = reference.problems.get(pid)
        if before is None or not line.get("complete", True) or not before.get("complete", True):
            continue
        was, now = bool(before.get("pass_at_n")), bool(line.get("pass_at_n"))
        if was != now:
            found.append(Change(pid, now, before, line))
    return tuple(sorted(found, key=lambda c: (c.now_solved, int(c.current.get("index", 0)))))


def build(runs: Sequence[Run], reference: int = 0, tolerance: float = 0.0) -> list[SuiteReport]:
    """`runs[reference]` is the baseline (or the first run): deltas and changes are against it."""
    reports = []
    for name in runs[reference].suites:
        present = [(run, run.suites[name]) for run in runs if name in run.suites]
        base = runs[reference].suites[name]
        kind = suite_kind(base.summary)
        metric = HEADLINE.get(name, "average_at_n") if kind != "other" else HEADLINE.get(name, "accuracy")
        values = [_number(s.summary.get(metric)) for _, s in present]
        # only complete runs with a value are ranked: an incomplete one's number is not a score
        ranked = [v if _complete(s.summary) else None for (_, s), v in zip(present, values, strict=True)]
        best_value = max((v for v in ranked if v is not None), default=None)
        best_index = ranked.index(best_value) if best_value is not None and len(present) > 1 else None
        rows = []
        for index, ((run, suite), value) in enumerate(zip(present, values, strict=True)):
            is_reference = run is runs[reference]
            interval = (suite.summary.get("ci95") or {}).get(metric)
            rows.append(
                Row(
                    label=run.label,
                    suite=suite,
                    headline=metric,
                    value=value,
                    ci95=tuple(interval) if interval else None,
                    is_reference=is_reference,
                    best=index == best_index,
                    delta=None if is_reference else _delta(base, suite, tolerance),
                    stop_reasons=_stop_reasons(suite),
                    incomplete=None if _complete(suite.summary) else _incomplete(suite.summary),
                )
            )
        changes = {run.label: _changes(base, suite) for run, suite in present if run is not runs[reference]}
        reports.append(SuiteReport(name, kind, tuple(rows), changes))
    return reports


def _complete(summary: Mapping[str, Any]) -> bool:
    return bool(summary.get("complete", True))  # a summary without the field: a complete run


def _incomplete(summary: Mapping[str, Any]) -> str:
    return str(summary.get("incomplete") or "not every selected problem was scored")


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
