"""The report as Markdown (GitHub-flavoured tables): for pull requests, job summaries
and terminals."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_agenteval.report.analysis import SuiteReport
from pytest_agenteval.report.runs import Run
from pytest_agenteval.report.tables import Table, change_lines, suite_tables


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table_lines(table: Table, level: str = "###") -> list[str]:
    lines = [f"{level} {table.title}", "", "| " + " | ".join(_cell(h) for h in table.header) + " |"]
    lines.append("|" + "|".join("---" for _ in table.header) + "|")
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table.rows]
    if table.note:
        lines += ["", table.note]
    return lines + [""]


def _ids(ids: Sequence[str]) -> str:
    return ", ".join(f"`{i}`" for i in ids) if ids else "none"


def suite_lines(report: SuiteReport) -> list[str]:
    tables = suite_tables(report)
    lines = table_lines(tables[0], "##")
    for table in tables[1:]:
        lines += table_lines(table)
    reference = next(r.label for r in report.rows if r.is_reference)
    for label, gained, lost in change_lines(report):
        lines += [
            f"### Changed problems: {label} vs {reference}",
            "",
            f"- solved now, not in {reference} ({len(gained)}): {_ids(gained)}",
            f"- solved in {reference}, not now ({len(lost)}): {_ids(lost)}",
            "",
        ]
    return lines


def render(
    runs: Sequence[Run], reports: Sequence[SuiteReport], mixed: str | None = None, notes: Sequence[str] = ()
) -> str:
    lines = ["# pytest-agenteval report", ""]
    lines += [f"- **{run.label}**: `{run.path.name}`" for run in runs]
    lines.append("")
    if mixed:
        lines += [f"> **Mixed runs** (--allow-mixed): {mixed}.", ""]
    for note in notes:
        lines += [note, ""]
    for report in reports:
        lines += suite_lines(report)
    return "\n".join(lines).rstrip() + "\n"
