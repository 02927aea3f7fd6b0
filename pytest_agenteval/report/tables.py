"""The report's tables, built once and rendered as Markdown or HTML. Cells are text;
rates are percentages with one decimal (as the lab's chart labels), deltas are points."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_agenteval.report.analysis import Row, SuiteReport

BEST = "★"
INCOMPLETE = "INCOMPLETE"  # the marker of a run that is never ranked
_HEADLINE_NAMES = {"average_at_n": "Average@N", "accuracy": "accuracy"}


@dataclass(frozen=True)
class Table:
    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""


def pct(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-"
    return f"{100 * value:.1f}%"


def with_ci(summary: Mapping[str, Any], name: str) -> str:
    if summary.get(name) is None and summary.get("not_scored"):  # nothing scored: say why
        return f"n/a ({summary['not_scored']})"
    interval = (summary.get("ci95") or {}).get(name)
    value = pct(summary.get(name))
    return f"{value} [{pct(interval[0])}, {pct(interval[1])}]" if interval else value


def run_label(row: Row) -> str:
    label = row.label + (" (reference)" if row.is_reference else "")
    return f"{label} {BEST}" if row.best else _marked(label, row)


def _marked(label: str, row: Row) -> str:
    """An incomplete run's label carries why: its numbers are not the model's score."""
    return f"{label} {INCOMPLETE} ({row.incomplete})" if row.incomplete else label


def delta_cells(row: Row) -> tuple[str, str]:
    if row.delta is None:
        return ("", "")
    d = row.delta
    return (f"{d.points:+.1f} pp [{d.ci95_points[0]:+.1f}, {d.ci95_points[1]:+.1f}]", d.verdict)


def headline_table(report: SuiteReport) -> Table:
    reference = next(r.label for r in report.rows if r.is_reference)
    delta_header = (f"Δ vs {reference} (95% CI)", "paired bootstrap")
    if report.kind == "math":
        n = report.rows[0].suite.summary.get("val_n")
        header = ("Run", "N", "Problems", f"Average@{n} [95% CI]", f"Pass@{n} [95% CI]", "Format", f"maj@{n}")
        cells = [
            (
                str(s.get("val_n")),
                str(s.get("problems")),
                with_ci(s, "average_at_n"),
                with_ci(s, "pass_at_n"),
                with_ci(s, "format_rate"),
                with_ci(s, "maj_at_n") if s.get("maj_at_n") is None else pct(s.get("maj_at_n")),
            )
            for s in (r.suite.summary for r in report.rows)
        ]
    else:
        header = ("Run", "N", "Problems", "Accuracy")
        cells = [
            (str(s.get("val_n")), str(s.get("problems")), with_ci(s, r.headline))
            for r, s in ((r, r.suite.summary) for r in report.rows)
        ]
    if len(report.rows) == 1:  # one run (a job summary): no reference, no deltas
        return Table(report.name, header, ((_marked(report.rows[0].label, report.rows[0]), *cells[0]),))
    rows = tuple((run_label(r), *c, *delta_cells(r)) for r, c in zip(report.rows, cells, strict=True))
    metric = report.rows[0].headline
    note = (
        f"{BEST} best {_HEADLINE_NAMES.get(metric, metric)} of the complete runs ({INCOMPLETE} ones are "
        f"never ranked). Δ = run - {reference} in percentage points "
        "over the problems both ran; the verdict is the paired bootstrap `--agenteval-compare` applies."
    )
    return Table(report.name, (*header, *delta_header), rows, note)


def pass_at_k_table(report: SuiteReport) -> Table | None:
    curves = [r.suite.summary.get("pass_at_k") or {} for r in report.rows]
    ks = sorted({k for curve in curves for k in curve}, key=int)
    if not ks:
        return None
    rows = tuple((r.label, *(pct(c.get(k)) for k in ks)) for r, c in zip(report.rows, curves, strict=True))
    return Table("pass@k (unbiased)", ("Run", *(f"k={k}" for k in ks)), rows)


def stop_reason_table(report: SuiteReport) -> Table | None:
    reasons = sorted({k for r in report.rows for k in r.stop_reasons})
    if not reasons:
        return None
    rows = tuple((r.label, *(str(r.stop_reasons.get(k, 0)) for k in reasons)) for r in report.rows)
    return Table("Stop reasons (generations)", ("Run", *reasons), rows)


def tool_table(report: SuiteReport) -> Table | None:
    summaries = [r.suite.summary for r in report.rows]
    if not any(s.get("mode") == "retool" or s.get("mean_code_calls") for s in summaries):
        return None
    rows = tuple(
        (
            r.label,
            _two(s.get("mean_code_calls")),
            _two(s.get("mean_turns")),
            pct((s.get("sandbox") or {}).get("success_rate")),
            str((s.get("sandbox") or {}).get("timeout", 0)),
        )
        for r, s in zip(report.rows, summaries, strict=True)
    )
    return Table("Tool use", ("Run", "code calls / gen", "turns / gen", "code ok", "timeouts"), rows)


def _two(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) else "-"  # None: no generation


def bfcl_tables(report: SuiteReport) -> list[Table]:
    summaries = [r.suite.summary for r in report.rows]
    categories = list(dict.fromkeys(c for s in summaries for c in s.get("per_category") or {}))
    per_category = tuple(
        (r.label, *(_category_cell((s.get("per_category") or {}).get(c)) for c in categories))
        for r, s in zip(report.rows, summaries, strict=True)
    )
    groups = list(dict.fromkeys(g for s in summaries for g in s.get("groups") or {}))
    group_rows = tuple(
        (r.label, pct(s.get("lenient_accuracy")), *(pct((s.get("groups") or {}).get(g)) for g in groups))
        for r, s in zip(report.rows, summaries, strict=True)
    )
    return [
        Table("BFCL categories", ("Run", *categories), per_category),
        Table(
            "BFCL official groups",
            ("Run", "lenient", *groups),
            group_rows,
            "Groups over the categories present (`groups`; the leaderboard counts missing ones as 0).",
        ),
    ]


def _category_cell(values: Mapping[str, Any] | None) -> str:
    if not values:
        return "-"
    return f"{pct(values.get('accuracy'))} ({values.get('correct')}/{values.get('total')})"


def gaia_tables(report: SuiteReport) -> list[Table]:
    summaries = [r.suite.summary for r in report.rows]
    levels = sorted({lv for s in summaries for lv in s.get("per_level") or {}}, key=int)
    drops = list(dict.fromkeys(d for s in summaries for d in s.get("drop_rates") or {}))
    rows = tuple(
        (
            r.label,
            *(_category_cell((s.get("per_level") or {}).get(lv)) for lv in levels),
            *(pct((s.get("drop_rates") or {}).get(d)) for d in drops),
        )
        for r, s in zip(report.rows, summaries, strict=True)
    )
    header = ("Run", *(f"level {lv}" for lv in levels), *(f"drop {d}" for d in drops))
    return [Table("GAIA levels", header, rows, "drop = (A_l - A_l+1) / A_l; - when A_l = 0.")]


def suite_tables(report: SuiteReport) -> list[Table]:
    tables: list[Table | None] = [headline_table(report)]
    if report.kind == "math":
        tables += [pass_at_k_table(report), tool_table(report)]
    elif report.kind == "bfcl":
        tables += bfcl_tables(report)
    elif report.kind == "gaia":
        tables += gaia_tables(report)
    tables.append(stop_reason_table(report))
    return [t for t in tables if t is not None]


def change_lines(report: SuiteReport) -> list[tuple[str, Sequence[str], Sequence[str]]]:
    """(run label, problem ids now solved, problem ids no longer solved) per compared run."""
    return [
        (
            label,
            [c.problem_id for c in changes if c.now_solved],
            [c.problem_id for c in changes if not c.now_solved],
        )
        for label, changes in report.changes.items()
    ]
