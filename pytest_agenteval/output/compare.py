"""Baseline comparison: `--agenteval-compare OLD.jsonl` fails the run only on a drop that
a paired bootstrap over the problems both runs share finds significant."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agenteval.api.records import ProblemRecord
from pytest_agenteval.datasets.jsonl import read_jsonl
from pytest_agenteval.stats.paired import HEADLINE, paired_bootstrap


class BaselineError(ValueError):
    """The baseline file cannot be used; the message is one line."""


@dataclass(frozen=True)
class Comparison:
    suite: str
    metric: str
    shared: int
    baseline: float
    current: float
    diff: float
    ci95: tuple[float, float]
    passed: bool
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "metric": self.metric,
            "shared_problems": self.shared,
            "baseline": self.baseline,
            "current": self.current,
            "diff": self.diff,
            "ci95": list(self.ci95),
            "passed": self.passed,
            "reason": self.reason,
        }


def problem_scores(records: Sequence[ProblemRecord]) -> dict[str, float]:
    """Per complete problem: the fraction of correct generations, as `load_baseline` reads
    an earlier run (here, not in `stats`, which sits below the records)."""
    return {str(r.problem_id): r.num_correct / len(r.generations) for r in records if r.complete}


def load_baseline(path: Path) -> dict[str, dict[str, float]]:
    """Per suite, per problem id: the fraction of correct generations (complete problems)."""
    if not path.is_file():
        raise BaselineError(
            f"--agenteval-compare {path}: no such file; give a results JSONL of an earlier run"
        )
    scores: dict[str, dict[str, float]] = {}

    def bad_line(number: int, _: json.JSONDecodeError) -> Exception:
        return BaselineError(f"--agenteval-compare {path}:{number}: not valid JSON")

    for _, row in read_jsonl(path, bad_line):
        if row.get("type") == "problem" and row.get("complete", True) and row.get("generations"):
            correct = sum(bool(g.get("correct")) for g in row["generations"])
            scores.setdefault(row["suite"], {})[str(row["problem_id"])] = correct / len(row["generations"])
    if not scores:
        raise BaselineError(f"--agenteval-compare {path}: no problem lines; is it a results file?")
    return scores


def compare(
    suite: str,
    records: Sequence[ProblemRecord],
    baseline: Mapping[str, Mapping[str, float]],
    tolerance: float,
    seed: int = 0,
) -> Comparison:
    """Fail iff the drop exceeds the tolerance and the whole interval lies below zero."""
    metric = HEADLINE.get(suite, "average_at_n")
    shared, old, new, interval = paired_bootstrap(baseline.get(suite, {}), problem_scores(records), seed=seed)
    diff = round(new - old, 6)
    if shared == 0:
        return Comparison(
            suite,
            metric,
            0,
            old,
            new,
            diff,
            interval,
            False,
            "no problems shared with the baseline: comparison fails closed",
        )
    significant = interval[1] < 0 and diff < -tolerance
    verdict = "significant drop" if significant else "no significant drop"
    reason = (
        f"{new:.4f} vs {old:.4f} on {shared} shared problems, diff {diff:+.4f} "
        f"[{interval[0]:+.4f}, {interval[1]:+.4f}], tolerance {tolerance:g}: {verdict}"
    )
    return Comparison(suite, metric, shared, old, new, diff, interval, not significant, reason)
