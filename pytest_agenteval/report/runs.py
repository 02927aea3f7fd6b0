"""Results files as runs: the last summary line of each suite and its problem lines,
and the check that the runs of one report measure the same thing."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agenteval.datasets.jsonl import read_jsonl


class ReportError(ValueError):
    """A report that cannot be made; the message is one line naming the fix."""


@dataclass(frozen=True)
class SuiteRun:
    """One suite's part of a results file."""

    summary: Mapping[str, Any]
    problems: Mapping[str, Mapping[str, Any]]  # problem id (as text) -> problem line

    @property
    def name(self) -> str:
        return str(self.summary["suite"])


@dataclass(frozen=True)
class Run:
    label: str
    path: Path
    suites: Mapping[str, SuiteRun] = field(default_factory=dict)


_STEP = re.compile(r"(?:^|[-_.])(base|step[-_]?(\d+))(?=$|[-_.])", re.IGNORECASE)


def default_label(path: Path) -> str:
    """`aime25-retool-step20.jsonl` -> "Step 20", `...-base.jsonl` -> "Base" (the lab's
    names); else the file name without `.jsonl`."""
    match = _STEP.search(path.stem)
    if match:
        return f"Step {int(match[2])}" if match[2] else "Base"
    return path.stem


def load_run(path: Path, label: str | None = None) -> Run:
    if not path.is_file():
        raise ReportError(f"{path}: no such file; give results JSONL files written by a pytest-agenteval run")
    summaries: dict[str, Mapping[str, Any]] = {}
    problems: dict[str, dict[str, Mapping[str, Any]]] = {}

    def bad_line(number: int, _: json.JSONDecodeError) -> Exception:
        return ReportError(f"{path}:{number}: not valid JSON; is it a results file?")

    for _, row in read_jsonl(path, bad_line):
        if row.get("type") == "summary":
            summaries[row["suite"]] = row  # the last one of a suite wins, as in the lab
        elif row.get("type") == "problem":
            problems.setdefault(row["suite"], {})[str(row["problem_id"])] = row
    if not summaries:
        hint = (
            "the run did not finish (a .partial file)" if path.suffix == ".partial" else "not a results file"
        )
        raise ReportError(f"{path}: no summary line ({hint}); give the results file of a finished run")
    suites = {name: SuiteRun(s, problems.get(name, {})) for name, s in sorted(summaries.items())}
    return Run(label or default_label(path), path, suites)


def _dataset(summary: Mapping[str, Any]) -> Any:
    """The data's identity: content hash where known (paths differ between machines)."""
    if summary.get("dataset_sha256"):
        return ("sha256", summary["dataset_sha256"])
    if summary.get("dataset_id"):
        return ("hub", summary["dataset_id"], summary.get("dataset_revision"))
    keys = ("dataset", "dataset_path", "bfcl_data_dir", "gaia_path", "split")
    return tuple((k, summary.get(k)) for k in keys if summary.get(k) is not None)


def _selection(summary: Mapping[str, Any]) -> Any:
    selection = dict(summary.get("selection") or {})
    selection["limit_per_category"] = (summary.get("config") or {}).get("limit_per_category")
    return tuple(sorted((k, str(v)) for k, v in selection.items()))


_ASPECTS = (
    ("version", lambda s: s.get("suite_version")),  # a file from before versions: unknown, not checked
    ("N", lambda s: s.get("val_n")),
    ("dataset", _dataset),
    ("selection", _selection),
)


def mixed_reason(runs: Sequence[Run]) -> str | None:
    """Why these runs do not measure the same thing (None when they do)."""
    first = runs[0]
    for run in runs[1:]:
        if set(run.suites) != set(first.suites):
            return (
                f"{run.path.name} has suites {', '.join(run.suites)} but {first.path.name} has "
                f"{', '.join(first.suites)}"
            )
        for name, suite in run.suites.items():
            aspect = differing_aspect(suite.summary, first.suites[name].summary)
            if aspect is not None:
                return (
                    f"{name} {aspect} differs: {run.path.name} has {show_aspect(aspect, suite.summary)}, "
                    f"{first.path.name} has {show_aspect(aspect, first.suites[name].summary)}"
                )
    return None


def differing_aspect(
    mine: Mapping[str, Any],
    theirs: Mapping[str, Any],
    aspects: Sequence[str] = ("version", "N", "dataset", "selection"),
) -> str | None:
    """The first aspect (of `aspects`) in which two summaries of one suite differ: the rule
    by which a report refuses mixed runs and `--agenteval-compare` a baseline at start-up
    (where only N is known yet: `{"val_n": N}`)."""
    for aspect, read in _ASPECTS:
        if aspect == "version" and (read(mine) is None or read(theirs) is None):
            continue
        if aspect in aspects and read(mine) != read(theirs):
            return aspect
    return None


def show_aspect(aspect: str, summary: Mapping[str, Any]) -> str:
    if aspect == "version":
        return f"version {summary.get('suite_version')}"
    if aspect == "N":
        return f"N={summary.get('val_n')}"
    if aspect == "selection":
        selection = summary.get("selection") or {}
        parts = [f"{k}={v}" for k, v in selection.items() if v not in (None, 0, "")]
        per_category = (summary.get("config") or {}).get("limit_per_category")
        if per_category:
            parts.append(f"limit_per_category={per_category}")
        return ", ".join(parts) or "everything"
    found = _dataset(summary)
    return " ".join(str(x) for x in found) if isinstance(found, tuple) else str(found)


def before_versions(who: str, suite: str, version: Any, done: str = "compared") -> str:
    """One line: a results file from before suite versions (no `suite_version`) is compared
    (or merged) with any version, unchecked."""
    said = f"{who} records no {suite} version (written before suite versions)"
    return f"{said}: {done} with version {version} unchecked"


def unversioned_notes(runs: Sequence[Run]) -> list[str]:
    """A line for each run that records no version of a suite that another run records."""
    notes = []
    for name in dict.fromkeys(name for run in runs for name in run.suites):
        of = [(run, run.suites[name].summary.get("suite_version")) for run in runs if name in run.suites]
        known = sorted({str(v) for _, v in of if v is not None})
        notes += [
            before_versions(run.path.name, name, ", ".join(known)) for run, v in of if v is None and known
        ]
    return notes


def check_comparable(runs: Sequence[Run], allow_mixed: bool) -> str | None:
    """Raise on mixed runs unless allowed; returns the reason when they were allowed."""
    reason = mixed_reason(runs)
    if reason and not allow_mixed:
        raise ReportError(f"runs are not comparable: {reason}; pass --allow-mixed to compare them anyway")
    return reason
