"""The comparison report a sweep writes at its end: the models' results files (one per
model, in model order) through `pytest-agenteval report`'s own analysis, tables and charts,
the first model as the reference."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pytest_agenteval.report import markdown as markdown_report
from pytest_agenteval.report.analysis import build
from pytest_agenteval.report.runs import ReportError, Run, check_comparable, load_run

NO_MATPLOTLIB = (
    "matplotlib is not installed, so this is the Markdown report, without charts; "
    "pip install 'pytest-agenteval[report]' for the HTML one"
)


def write_sweep_report(
    paths: Sequence[Path | str], labels: Sequence[str], out_html: Path, dpi: int = 110
) -> Path:
    """Write the HTML report of a sweep to `out_html` and return its path: the checkpoint
    chart over the models in order, paired deltas against the FIRST model, and the problems
    solved by one and not the other. Without matplotlib, the Markdown report beside it
    (`out_html` with `.md`), which says why, is written and returned instead. A model whose
    file cannot be read (its run did not finish) is left out with a note; with none
    readable: ReportError. Runs that differ in N, data or selection are still compared,
    with a note saying how (a sweep's models share them by construction)."""
    if len(paths) != len(labels):
        raise ValueError(f"{len(paths)} results files for {len(labels)} labels; give one label per file")
    runs: list[Run] = []
    notes: list[str] = []
    for path, label in zip(paths, labels, strict=True):
        try:
            runs.append(load_run(Path(path), label))
        except ReportError as exc:
            notes.append(f"{label} is left out: {exc}")
    if not runs:
        raise ReportError(f"no model's results could be read: {'; '.join(notes)}")
    notes.insert(0, f"{runs[0].label} is the reference: each delta is another model minus it.")
    mixed = check_comparable(runs, allow_mixed=True)
    if mixed:
        notes.append(f"These runs differ: {mixed}.")
    reports = build(runs, 0)
    try:
        from pytest_agenteval.report import _html
        from pytest_agenteval.report._charts import suite_charts
    except ImportError:
        markdown = out_html.with_suffix(".md")
        _write(markdown, markdown_report.render(runs, reports, notes=[f"**{NO_MATPLOTLIB}.**", *notes]))
        return markdown
    charts = {report.name: suite_charts(report, dpi) for report in reports}
    _write(out_html, _html.render(runs, reports, charts, notes=notes))
    return out_html


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
