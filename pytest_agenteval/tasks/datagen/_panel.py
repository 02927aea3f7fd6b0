"""A judge panel as statistics: Krippendorff's alpha (`stats.krippendorff`, re-exported
here and from `tasks.datagen`, where users import it), per-judge severity, outliers by
distance from the others' median (the design documents' |z| > 2 cannot fire at 3-5
judges: |z| <= (n-1)/sqrt(n)), and the items to show a human first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pytest_agenteval.stats.bootstrap import cluster_bootstrap
from pytest_agenteval.stats.krippendorff import Value
from pytest_agenteval.stats.krippendorff import krippendorff_alpha as krippendorff_alpha
from pytest_agenteval.stats.krippendorff import reliability_units as reliability_units
from pytest_agenteval.tasks.datagen._verdict import DIMENSIONS

OUTLIER_DISTANCE = 2  # |score - median of the other judges| at least this: an outlier
FLAG_OUTLIER_RATE = 0.25
FLAG_SEVERITY = 1.0
ALPHA_ITERATIONS = 500


Table = Mapping[str, Mapping[str, Mapping[str, int] | None]]  # item -> judge -> scores


def _values(table: Table, judges: Sequence[str], dim: str) -> list[list[Value]]:
    rows = []
    for by_judge in table.values():
        row: list[Value] = []
        for judge in judges:
            scores = by_judge.get(judge)
            row.append(
                None if scores is None else (sum(scores.values()) / 4 if dim == "total" else scores[dim])
            )
        rows.append(row)
    return rows


def _alpha_entry(units: list[list[Value]], level: str, seed: int) -> dict[str, Any]:
    alpha = krippendorff_alpha(units, level)
    reason = None if alpha is not None else "undefined: fewer than two pairable values or no variation"
    # a resample without variation has no alpha: counted in undefined_resamples, not dropped
    ci = cluster_bootstrap(units, lambda sample: krippendorff_alpha(sample, level), seed, ALPHA_ITERATIONS)
    return {
        "alpha": None if alpha is None else round(alpha, 6),
        "ci95": ci.bounds(),
        "undefined_resamples": ci.undefined,
        "reason": reason,
        "level": level,
    }


def _agreement(units: list[list[Value]]) -> dict[str, float | None]:
    exact = within = pairs = 0
    for unit in units:
        values = [v for v in unit if v is not None]
        for a in range(len(values)):
            for b in range(a + 1, len(values)):
                pairs += 1
                exact += values[a] == values[b]
                within += abs(values[a] - values[b]) <= 1
    return {"exact": exact / pairs if pairs else None, "within_1": within / pairs if pairs else None}


def _outliers(
    table: Table, judges: Sequence[str]
) -> tuple[dict[str, int], dict[str, int], list[dict[str, Any]]]:
    """A score is an outlier when it lies >= 2 from the median of the other judges' scores
    and strictly farther from it than any other judge's score from theirs (with 3 judges
    the others' median is a mean of two: at (5, 5, 1) each 5 is 2 from 3, the 1 is 4
    from 5, and only the 1 is flagged). Cells need at least two other judges."""
    flags = dict.fromkeys(judges, 0)
    cells = dict.fromkeys(judges, 0)
    found = []
    for item, by_judge in table.items():
        for dim in DIMENSIONS:
            scored = {j: s[dim] for j, s in by_judge.items() if s is not None}
            if len(scored) < 3:
                continue
            distance = {}
            for judge, score in scored.items():
                cells[judge] += 1
                others = [v for j, v in scored.items() if j != judge]
                distance[judge] = (abs(score - float(np.median(others))), float(np.median(others)))
            ranked = sorted(distance.items(), key=lambda kv: -kv[1][0])
            (judge, (far, median)), runner_up = ranked[0], ranked[1][1][0]
            if far >= OUTLIER_DISTANCE and far > runner_up:
                flags[judge] += 1
                found.append(
                    {"item": item, "judge": judge, "dimension": dim, "score": scored[judge], "median": median}
                )
    return flags, cells, found


def _severity(table: Table, judge: str) -> float | None:
    """Mean offset of the judge's item mean from the panel's median item mean (robust:
    one lenient judge does not make the others look severe)."""
    offsets = []
    for by_judge in table.values():
        own = by_judge.get(judge)
        means = [sum(s.values()) / 4 for s in by_judge.values() if s is not None]
        if own is not None and len(means) >= 2:
            offsets.append(sum(own.values()) / 4 - float(np.median(means)))
    return round(float(np.mean(offsets)), 6) if offsets else None


def panel_summary(table: Table, judges: Sequence[str], seed: int) -> dict[str, Any] | None:
    """`table`: item -> judge -> the judge's four scores (None: no valid verdict)."""
    if len(judges) < 2:
        return None
    alpha = {dim: _alpha_entry(_values(table, judges, dim), "ordinal", seed) for dim in DIMENSIONS}
    total_units = _values(table, judges, "total")
    alpha["total"] = _alpha_entry(total_units, "interval", seed)
    flags, cells, found = _outliers(table, judges)
    per_judge: dict[str, Any] = {}
    for position, judge in enumerate(judges):
        rest = [[v for k, v in enumerate(unit) if k != position] for unit in total_units]
        dropped = krippendorff_alpha(rest, "interval") if len(judges) > 2 else None
        rate = flags[judge] / cells[judge] if cells[judge] else None
        severity = _severity(table, judge)
        reasons = []
        if rate is not None and rate >= FLAG_OUTLIER_RATE:
            reasons.append(f"outlier on {rate:.0%} of scores")
        if severity is not None and abs(severity) >= FLAG_SEVERITY:
            reasons.append(f"{'lenient' if severity > 0 else 'severe'} by {abs(severity):.2f} points")
        per_judge[judge] = {
            "severity": severity,
            "outlier_rate": rate,
            "alpha_total_if_dropped": None if dropped is None else round(dropped, 6),
            "flagged": bool(reasons),
            "reasons": reasons,
        }
    spread = {
        item: (max(v) - min(v) if len(v := [x for x in unit if x is not None]) >= 2 else 0.0)
        for item, unit in zip(table, total_units, strict=True)
    }
    return {
        "judges": list(judges),
        "alpha": alpha,
        "agreement": {dim: _agreement(_values(table, judges, dim)) for dim in DIMENSIONS},
        "per_judge": per_judge,
        "flagged_judges": [j for j in judges if per_judge[j]["flagged"]],
        "outliers": found[:200],
        "outlier_count": len(found),
        "review_order": sorted(spread, key=lambda item: -spread[item])[:200],
    }
