"""The `report` subcommand's command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from pytest_agenteval.report.analysis import build
from pytest_agenteval.report.runs import ReportError, Run, check_comparable, load_run, unversioned_notes

USAGE_ERROR = 2


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pytest-agenteval report",
        description="Compare pytest-agenteval results files: one row per run, deltas against a baseline, "
        "per-problem changes, charts.",
    )
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN.jsonl", help="results files, in chart order")
    p.add_argument(
        "--baseline", type=Path, help="results file the others are compared with (its own row first)"
    )
    p.add_argument("--label", action="append", default=[], help="label of each RUN, in order (repeatable)")
    p.add_argument("--baseline-label", help="label of the baseline row (default: from its file name)")
    p.add_argument("--markdown", type=Path, metavar="OUT.md", help="write the Markdown report here")
    p.add_argument("--html", type=Path, metavar="OUT.html", help="write one self-contained HTML file here")
    p.add_argument("--png", type=Path, metavar="DIR", help="write each chart as DIR/<suite>-<chart>.png")
    p.add_argument("--dpi", type=int, default=110, help="chart resolution (default 110)")
    p.add_argument(
        "--tolerance",
        type=float,
        default=0.0,
        help="change in the headline metric (a fraction) below which no verdict is significant",
    )
    p.add_argument(
        "--allow-mixed",
        action="store_true",
        help="compare runs whose suite, N, dataset or selection differ (the report says so)",
    )
    return p


def _load(args: argparse.Namespace) -> list[Run]:
    """The runs in report order; the baseline (or else the first run) is the reference, runs[0]."""
    if len(args.label) > len(args.runs):
        raise ReportError(f"{len(args.label)} --label for {len(args.runs)} runs; give at most one per RUN")
    labels = args.label + [None] * (len(args.runs) - len(args.label))
    runs = [load_run(path, label) for path, label in zip(args.runs, labels, strict=True)]
    if args.baseline is not None:
        runs.insert(0, load_run(args.baseline, args.baseline_label))
    seen: dict[str, int] = {}
    for index, run in enumerate(runs):  # labels key the per-problem views: keep them unique
        seen[run.label] = seen.get(run.label, 0) + 1
        if seen[run.label] > 1:
            runs[index] = Run(f"{run.label} ({seen[run.label]})", run.path, run.suites)
    return runs


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        runs = _load(args)
        mixed = check_comparable(runs, args.allow_mixed)
    except ReportError as exc:
        print(f"pytest-agenteval report: {exc}", file=sys.stderr)
        return USAGE_ERROR
    for note in unversioned_notes(runs):
        print(f"pytest-agenteval report: {note}", file=sys.stderr)
    reports = build(runs, 0, args.tolerance)
    from pytest_agenteval.report import markdown as markdown_report

    markdown = markdown_report.render(runs, reports, mixed)
    if args.markdown:
        _write(args.markdown, markdown)
    if args.html or args.png:
        try:
            from pytest_agenteval.report._charts import suite_charts
        except ImportError:
            print(
                "pytest-agenteval report: --html and --png draw charts with matplotlib, which is not "
                "installed; pip install 'pytest-agenteval[report]' (or use --markdown)",
                file=sys.stderr,
            )
            return USAGE_ERROR
        charts = {report.name: suite_charts(report, args.dpi) for report in reports}
        if args.png:
            args.png.mkdir(parents=True, exist_ok=True)
            for chart in (c for group in charts.values() for c in group):
                (args.png / f"{chart.name}.png").write_bytes(chart.png)
        if args.html:
            from pytest_agenteval.report import _html

            _write(args.html, _html.render(runs, reports, charts, mixed))
    if not (args.markdown or args.html or args.png):
        sys.stdout.write(markdown)
    for target in (args.markdown, args.html, args.png):
        if target:
            print(f"wrote {target}", file=sys.stderr)
    return 0


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
