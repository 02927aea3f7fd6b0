"""The report's charts as PNG bytes, drawn with matplotlib's object API (no pyplot
state, no display). The checkpoint chart is the lab's `analysis.py` figure (colours,
serif style, percent axis) with our 95% intervals as error bars and the best run marked."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib  # imported here so a missing install is one clear line in the command

from pytest_agenteval.report.analysis import Row, SuiteReport

AVERAGE, PASS, FORMAT = "#D94A4A", "#3388B8", "#F28E2B"  # the lab's colours
PALETTE = ("#3388B8", "#D94A4A", "#F28E2B", "#59A14F", "#B07AA1", "#76B7B2", "#9C755F", "#EDC948")
STYLE = {
    "font.family": "serif",
    "font.serif": ["Times New Roman", "Times", "DejaVu Serif"],
    "font.size": 10,
    "axes.titlesize": 12,
    "axes.edgecolor": "#202020",
    "figure.facecolor": "white",
    "savefig.facecolor": "white",
}


@dataclass(frozen=True)
class Chart:
    name: str  # file stem: <suite>-<what>
    title: str
    png: bytes


def _figure(width: float, height: float, columns: int = 1) -> tuple[Any, list[Any]]:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height))
    axes = figure.subplots(1, columns, squeeze=False)[0]
    return figure, list(axes)


def _png(figure: Any, dpi: int) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return buffer.getvalue()


def _percent_axis(axis: Any, top: float = 1.08) -> None:
    from matplotlib.ticker import PercentFormatter

    axis.set_ylim(0.0, top)
    axis.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
    axis.grid(axis="y", color="#C7C7C7", linestyle="-.", linewidth=0.8, alpha=0.75, zorder=0)
    axis.tick_params(direction="in", top=True, right=True)


def _labels(rows: Sequence[Row]) -> list[str]:
    return [f"{r.label}\n({_mark(r)})" if _mark(r) else r.label for r in rows]  # DejaVu has no star


def _legend(row: Row) -> str:
    return f"{row.label} ({_mark(row)})" if _mark(row) else row.label


def _mark(row: Row) -> str:
    return "best" if row.best else "INCOMPLETE" if row.incomplete else ""


def _errors(rows: Sequence[Row], name: str) -> list[list[float]] | None:
    low, high = [], []
    for row in rows:
        value = row.suite.summary.get(name) or 0.0
        interval = (row.suite.summary.get("ci95") or {}).get(name)
        low.append(value - interval[0] if interval else 0.0)
        high.append(interval[1] - value if interval else 0.0)
    return [low, high] if any(low) or any(high) else None


def _value_labels(
    axis: Any,
    xs: Sequence[float],
    values: Sequence[float | None],
    errors: list[list[float]] | None,
    size: int = 8,
) -> None:
    """Each value above its bar or point, clear of its error bar; `n/a` where the summary
    has no number (nothing scored), never a 0.0 % it did not measure."""
    for index, (x, value) in enumerate(zip(xs, values, strict=True)):
        top = (value or 0.0) + (errors[1][index] if errors else 0.0)
        text = "n/a" if value is None else f"{value:.1%}"
        axis.text(x, top + 0.015, text, ha="center", va="bottom", fontsize=size, color="#202020")


def checkpoint_chart(report: SuiteReport) -> Any:
    """(a) Average@N and Pass@N bars with 95% intervals, (b) the format-rate line."""
    rows = report.rows
    n = rows[0].suite.summary.get("val_n")
    xs = list(range(len(rows)))
    figure, (bars, line) = _figure(13.0, 5.0, 2)
    width = 0.36
    for offset, name, colour, label in (
        (-1, "average_at_n", AVERAGE, "Average"),
        (1, "pass_at_n", PASS, "Pass"),
    ):
        positions = [x + offset * width / 2 for x in xs]
        values = [r.suite.summary.get(name) for r in rows]
        errors = _errors(rows, name)
        bars.bar(
            positions,
            [v or 0.0 for v in values],  # n/a: no bar, labelled so
            width=width,
            color=colour,
            edgecolor="#202020",
            zorder=3,
            yerr=errors,
            capsize=3,
            error_kw={"zorder": 4},
            label=f"{label}@{n}",
        )
        _value_labels(bars, positions, values, errors)
    bars.set_title(f"(a) Average@{n} & Pass@{n} (95% intervals)")
    bars.legend(loc="upper left", frameon=False)
    formats = [r.suite.summary.get("format_rate") for r in rows]
    errors = _errors(rows, "format_rate")
    line.errorbar(
        xs,
        [math.nan if v is None else v for v in formats],  # n/a: no point, the line breaks
        yerr=errors,
        color=FORMAT,
        marker="s",
        markersize=7,
        markeredgecolor="#202020",
        linewidth=2.1,
        capsize=3,
        zorder=4,
    )
    _value_labels(line, xs, formats, errors, 9)
    line.set_title("(b) Valid Answer Format Rate")
    for axis in (bars, line):
        axis.set_xticks(xs, _labels(rows))
        axis.set_xlabel("Model / Checkpoint")
        _percent_axis(axis, 1.14)
    figure.suptitle(f"{report.name}: checkpoint evaluation", fontsize=14)
    return figure


def pass_at_k_chart(report: SuiteReport) -> Any | None:
    curves = [r.suite.summary.get("pass_at_k") or {} for r in report.rows]
    if not any(len(c) > 1 for c in curves):
        return None
    figure, (axis,) = _figure(6.5, 4.2)
    for index, (row, curve) in enumerate(zip(report.rows, curves, strict=True)):
        ks = sorted(curve, key=int)
        axis.plot(
            [int(k) for k in ks],
            [curve[k] for k in ks],
            marker="o",
            color=PALETTE[index % len(PALETTE)],
            label=_legend(row),
        )
    from matplotlib.ticker import MaxNLocator

    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.set_xlabel("k (samples)")
    axis.set_title(f"{report.name}: unbiased pass@k")
    axis.legend(frameon=False, fontsize=8)
    _percent_axis(axis)
    return figure


def grouped_bars(
    title: str,
    groups: Sequence[str],
    rows: Sequence[Row],
    values: Sequence[Sequence[float]],
    annotations: Sequence[Sequence[str]] | None = None,
) -> Any:
    """One cluster per group (category, level), one bar per run."""
    figure, (axis,) = _figure(max(6.5, 0.9 * len(groups) * max(1, len(rows)) / 2 + 3), 4.4)
    width = 0.8 / max(1, len(rows))
    for index, (row, series) in enumerate(zip(rows, values, strict=True)):
        xs = [g + (index - (len(rows) - 1) / 2) * width for g in range(len(groups))]
        axis.bar(
            xs,
            series,
            width=width,
            color=PALETTE[index % len(PALETTE)],
            edgecolor="#202020",
            zorder=3,
            label=_legend(row),
        )
        for x, value, note in zip(
            xs, series, (annotations or [[]] * len(rows))[index] or [""] * len(xs), strict=False
        ):
            axis.text(x, value + 0.02, note or f"{value:.0%}", ha="center", va="bottom", fontsize=7)
    axis.set_xticks(
        list(range(len(groups))),
        list(groups),
        rotation=30 if len(groups) > 5 else 0,
        ha="right" if len(groups) > 5 else "center",
    )
    axis.set_title(title)
    axis.legend(
        frameon=False,
        fontsize=8,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.1 if len(groups) <= 5 else -0.3),
        ncol=min(4, len(rows)),
    )
    _percent_axis(axis, 1.15)
    return figure


def bfcl_charts(report: SuiteReport) -> list[tuple[str, str, Any]]:
    summaries = [r.suite.summary for r in report.rows]
    categories = list(dict.fromkeys(c for s in summaries for c in s.get("per_category") or {}))
    values = [
        [((s.get("per_category") or {}).get(c) or {}).get("accuracy", 0.0) for c in categories]
        for s in summaries
    ]
    groups = [
        g
        for g in dict.fromkeys(g for s in summaries for g in s.get("groups") or {})
        if any((s.get("groups") or {}).get(g) is not None for s in summaries)
    ]
    group_values = [[(s.get("groups") or {}).get(g) or 0.0 for g in groups] for s in summaries]
    return [
        (
            "categories",
            "BFCL accuracy per category",
            grouped_bars(f"{report.name}: accuracy per category", categories, report.rows, values),
        ),
        (
            "groups",
            "BFCL official summary groups",
            grouped_bars(
                f"{report.name}: official groups (categories present)", groups, report.rows, group_values
            ),
        ),
    ]


def gaia_chart(report: SuiteReport) -> Any:
    summaries = [r.suite.summary for r in report.rows]
    levels = sorted({lv for s in summaries for lv in s.get("per_level") or {}}, key=int)
    values = [
        [((s.get("per_level") or {}).get(lv) or {}).get("accuracy", 0.0) for lv in levels] for s in summaries
    ]
    notes = []
    for s, series in zip(summaries, values, strict=True):
        drops = s.get("drop_rates") or {}
        notes.append(
            [
                f"{v:.0%}"
                + (
                    f"\ndrop {drops[f'{lv}->{int(lv) + 1}']:.0%}"
                    if drops.get(f"{lv}->{int(lv) + 1}") is not None
                    else ""
                )
                for lv, v in zip(levels, series, strict=True)
            ]
        )
    return grouped_bars(
        f"{report.name}: accuracy per level (drop to the next level)",
        [f"level {lv}" for lv in levels],
        report.rows,
        values,
        notes,
    )


def stop_reason_chart(report: SuiteReport, with_tools: bool) -> Any | None:
    reasons = sorted({k for r in report.rows for k in r.stop_reasons})
    if not reasons:
        return None
    figure, axes = _figure(12.0 if with_tools else 6.5, 4.2, 2 if with_tools else 1)
    stacked, xs = axes[0], list(range(len(report.rows)))
    bottoms = [0.0] * len(report.rows)
    for index, reason in enumerate(reasons):
        shares = [r.stop_reasons.get(reason, 0) / max(1, sum(r.stop_reasons.values())) for r in report.rows]
        stacked.bar(
            xs,
            shares,
            bottom=bottoms,
            color=PALETTE[index % len(PALETTE)],
            edgecolor="#202020",
            zorder=3,
            label=reason,
        )
        bottoms = [b + s for b, s in zip(bottoms, shares, strict=True)]
    stacked.set_xticks(xs, _labels(report.rows))
    stacked.set_title(f"{report.name}: stop reasons (share of generations)")
    stacked.legend(
        frameon=False, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=min(4, len(reasons))
    )
    _percent_axis(stacked, 1.0)
    if with_tools:
        tools = axes[1]
        width = 0.36
        for offset, name, colour in ((-1, "mean_code_calls", PASS), (1, "mean_turns", FORMAT)):
            values = [r.suite.summary.get(name) or 0.0 for r in report.rows]
            tools.bar(
                [x + offset * width / 2 for x in xs],
                values,
                width=width,
                color=colour,
                edgecolor="#202020",
                zorder=3,
                label=name.replace("_", " "),
            )
        tools.set_xticks(xs, _labels(report.rows))
        tools.set_title("code calls and turns per generation")
        tools.legend(frameon=False, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
        tools.grid(axis="y", color="#C7C7C7", linestyle="-.", zorder=0)
    return figure


def suite_charts(report: SuiteReport, dpi: int = 110) -> list[Chart]:
    with matplotlib.rc_context(STYLE):
        drawn: list[tuple[str, str, Any]] = []
        if report.kind == "math":
            drawn.append(("checkpoints", "Average@N, Pass@N and format rate", checkpoint_chart(report)))
            drawn.append(("pass-at-k", "pass@k curves", pass_at_k_chart(report)))
        elif report.kind == "bfcl":
            drawn += bfcl_charts(report)
        elif report.kind == "gaia":
            drawn.append(("levels", "GAIA accuracy per level", gaia_chart(report)))
        tools = any(r.suite.summary.get("mode") == "retool" for r in report.rows)
        title = "Code calls, turns and stop reasons" if tools else "Stop reasons"
        drawn.append(("stop-reasons", title, stop_reason_chart(report, tools)))
        return [Chart(f"{report.name}-{name}", title, _png(fig, dpi)) for name, title, fig in drawn if fig]
