"""Generated problems (`problem`, `answer`, `solution`, `topic`) and the reference set.

Every line of the generated JSONL either loads (with its LaTeX repairs recorded) or is
counted in `load_errors` with its line number and reason: nothing is dropped silently."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agenteval.tasks.datagen._latex import corrupted_characters, loads_repaired

TEXT_FIELDS = ("problem", "answer", "solution", "topic")
KNOWN_TOPICS = ("algebra", "geometry", "number_theory", "combinatorics", "probability")


class DatagenDataError(Exception):
    """Unusable generated or reference data; one line naming the option and the fix."""


@dataclass(frozen=True)
class GeneratedProblem:
    problem_id: str
    index: int  # position among loaded problems (dataset order)
    line: int  # 1-based line in the file
    problem: str
    answer: str
    solution: str
    topic: str
    repairs: tuple[dict[str, Any], ...] = ()
    sha256: str = ""  # of the four fields, so a verification can tell it went stale

    @property
    def marker(self) -> str:
        return topic_marker(self.topic)


@dataclass(frozen=True)
class ReferenceProblem:
    problem_id: str
    problem: str
    answer: str
    solution: str = ""
    topic: str = ""


@dataclass(frozen=True)
class LoadReport:
    problems: tuple[GeneratedProblem, ...]
    load_errors: tuple[dict[str, Any], ...] = ()  # {"line", "reason"}
    lines: int = 0
    repaired_items: int = field(default=0)


def topic_marker(topic: str) -> str:
    """The marker of a topic: one of the five AIME topics, else `other_topic`."""
    key = re.sub(r"[^a-z0-9]+", "_", topic.strip().lower()).strip("_")
    return key if key in KNOWN_TOPICS else "other_topic"


def item_sha256(problem: str, answer: str, solution: str, topic: str) -> str:
    canonical = json.dumps([problem, answer, solution, topic], ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _parse_line(text: str, number: int) -> tuple[dict[str, Any] | None, list[dict[str, Any]], str | None]:
    try:
        row, repairs = loads_repaired(text)
    except json.JSONDecodeError as exc:
        return None, [], f"not JSON after LaTeX repair ({exc.msg} at column {exc.colno})"
    if not isinstance(row, dict):
        return None, [], "not a JSON object"
    records = [r.as_dict() for r in repairs]
    missing = [name for name in ("problem", "answer") if row.get(name) in (None, "")]
    if missing:
        return None, records, f"missing {', '.join(missing)}"
    for name in TEXT_FIELDS:
        value = row.get(name)
        if isinstance(value, str) and corrupted_characters(value):
            records.append(
                {"field": name, "kind": "control_characters", "found": corrupted_characters(value)}
            )
    return row, records, None


def load_generated(path: Path) -> LoadReport:
    """Read the generated JSONL (`--datagen-path`)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DatagenDataError(
            f"--datagen-path {path}: cannot read ({exc.strerror or exc}); give a JSONL of generated problems"
        ) from None
    problems: list[GeneratedProblem] = []
    errors: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        row, repairs, error = _parse_line(line, number)
        if row is None:
            errors.append({"line": number, "reason": error})
            continue
        problem_id = str(row.get("problem_id", row.get("id", f"gen-{number}")))
        if problem_id in seen:
            raise DatagenDataError(
                f"--datagen-path {path}:{number}: duplicate problem id {problem_id!r} "
                f"(first on line {seen[problem_id]}); ids must be unique"
            )
        seen[problem_id] = number
        fields = {name: str(row.get(name) or "").strip() for name in TEXT_FIELDS}
        problems.append(
            GeneratedProblem(
                problem_id=problem_id,
                index=len(problems),
                line=number,
                repairs=tuple(repairs),
                sha256=item_sha256(**fields),
                **fields,
            )
        )
    if not problems:
        raise DatagenDataError(
            f"--datagen-path {path}: no loadable problems ({len(errors)} unloadable lines); "
            "each line needs a JSON object with problem and answer"
        )
    repaired = sum(1 for p in problems if p.repairs)
    return LoadReport(tuple(problems), tuple(errors), len(lines), repaired)


def reference_from_rows(rows: Sequence[dict[str, Any]], where: str) -> list[ReferenceProblem]:
    """Reference problems from loaded rows (hub, JSONL or parquet): `problem` and
    `answer` required; `solution` and `topic` used when present."""
    references = []
    for index, row in enumerate(rows):
        problem = str(row.get("problem") or "").strip()
        if not problem or row.get("answer") in (None, ""):
            raise DatagenDataError(f"{where}: row {index + 1} needs problem and answer")
        references.append(
            ReferenceProblem(
                problem_id=str(row.get("id", row.get("problem_id", index))),
                problem=problem,
                answer=str(row["answer"]).strip(),
                solution=str(row.get("solution") or "").strip(),
                topic=str(row.get("topic") or "").strip(),
            )
        )
    if not references:
        raise DatagenDataError(f"{where}: the reference set is empty")
    return references
