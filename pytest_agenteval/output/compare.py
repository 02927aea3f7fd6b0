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
from pytest_agenteval.stats.paired import HEADLINE, paired_bootstrap, too_few


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
    decided: bool = True  # False: too few shared problems to decide; it does not fail the run

    @property
    def verdict(self) -> str:
        """PASS, FAIL, or UNDECIDED (too few problems: does not fail the run)."""
        return "UNDECIDED" if not self.decided else "PASS" if self.passed else "FAIL"

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
            "decided": self.decided,
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


def check_baseline(
    path: Path,
    baseline: Mapping[str, Mapping[str, float]],
    samples: Mapping[str, int],
    versions: Mapping[str, str] | None = None,
    allow_version_change: bool = False,
    flag: str = "--agenteval-allow-version-change",
) -> list[str]:
    """At start-up, with the selected suites known (suite -> its N): a baseline without one
    of them, or with another N, is refused by the rule `pytest-agenteval report` refuses
    mixed runs with (`report.runs.differing_aspect`). A baseline of another suite version
    (`versions`: suite -> this run's) is refused too, unless `allow_version_change`: then the
    returned lines say which versions are compared."""
    from pytest_agenteval.report.runs import (
        ReportError,
        before_versions,
        differing_aspect,
        load_run,
        show_aspect,
    )

    missing = sorted(name for name in samples if name not in baseline)
    if missing:
        raise BaselineError(
            f"--agenteval-compare {path}: not comparable: it has no {', '.join(missing)} results (it has "
            f"{', '.join(sorted(baseline))}); give a baseline of the suites this run selects"
        )
    try:
        summaries = {name: suite.summary for name, suite in load_run(path).suites.items()}
    except ReportError:  # no summary line (an unfinished run): its problems still compare
        summaries = {}
    notes = []
    for name, version in sorted((versions or {}).items()):
        theirs = summaries.get(name)
        if theirs is not None and theirs.get("suite_version") is None:
            notes.append(before_versions(f"--agenteval-compare {path}", name, version))
        if theirs is None or differing_aspect({"suite_version": version}, theirs, ("version",)) is None:
            continue
        said = (
            f"{name} version differs: this run has version {version}, the baseline has "
            f"{show_aspect('version', theirs)}"
        )
        if not allow_version_change:
            raise BaselineError(
                f"--agenteval-compare {path}: not comparable: {said} (its prompt, scorer or metrics "
                f"changed); give a baseline of this version, or pass {flag}"
            )
        notes.append(f"{flag}: comparing across versions: {said}")
    for name, n in sorted(samples.items()):
        theirs = summaries.get(name)
        if theirs is not None and differing_aspect({"val_n": n}, theirs, ("N",)) is not None:
            raise BaselineError(
                f"--agenteval-compare {path}: not comparable: {name} N differs: this run has N={n}, the "
                f"baseline has {show_aspect('N', theirs)}; pass --val-n {theirs.get('val_n')} or give a "
                f"baseline with N={n}"
            )
    return notes


def compare(
    suite: str,
    records: Sequence[ProblemRecord],
    baseline: Mapping[str, Mapping[str, float]],
    tolerance: float,
    seed: int = 0,
) -> Comparison:
    """Fail iff the drop exceeds the tolerance and the whole interval lies below zero; with
    too few shared problems (`stats.paired.MIN_PAIRED`), undecided: it does not fail."""
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
    measured = f"{new:.4f} vs {old:.4f} on {shared} shared problems, diff {diff:+.4f}"
    undecided = too_few(shared)
    if undecided is not None:
        return Comparison(
            suite, metric, shared, old, new, diff, interval, True, f"{measured}: {undecided}", decided=False
        )
    significant = interval[1] < 0 and diff < -tolerance
    verdict = "significant drop" if significant else "no significant drop"
    reason = f"{measured} [{interval[0]:+.4f}, {interval[1]:+.4f}], tolerance {tolerance:g}: {verdict}"
    return Comparison(suite, metric, shared, old, new, diff, interval, not significant, reason)
