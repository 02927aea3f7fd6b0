"""The report as one self-contained HTML file: inline CSS, charts as embedded PNG data
URIs, no script and no external resource, so it opens offline and reads without
JavaScript. Changed problems open with a click (<details>) onto both runs' texts."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from pytest_agenteval.report._charts import Chart
from pytest_agenteval.report.analysis import Change, SuiteReport
from pytest_agenteval.report.runs import Run
from pytest_agenteval.report.tables import Table, suite_tables

MAX_TEXT = 4000  # characters of one generation shown; the results file has them all
CSS = """
body{font-family:Georgia,'DejaVu Serif',serif;margin:2em auto;max-width:1300px;color:#202020;padding:0 1em}
h1{font-size:1.6em}h2{border-bottom:2px solid #202020;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.92em}
th,td{border:1px solid #bbb;padding:.3em .6em;text-align:right;white-space:nowrap}
.ci{color:#666;font-size:.85em}th{background:#f2f2f2}
td:first-child,th:first-child{text-align:left}tr.best td{background:#fff6e0;font-weight:bold}
tr.reference td{color:#555}.note{color:#555;font-size:.88em}.mixed{background:#ffecec;padding:.6em}
img{max-width:100%;border:1px solid #ddd;margin:.4em 0}details{margin:.3em 0}
summary{cursor:pointer}pre{white-space:pre-wrap;background:#f7f7f7;padding:.5em;font-size:.85em;
max-height:24em;overflow:auto}.ok{color:#1a7f37}.bad{color:#b3261e}.gen{margin-left:1em}
"""


_INTERVAL = re.compile(r"^(.+?) (\[[^\]]+\])$")


def _cell(text: str) -> str:
    """A value and its interval on two lines: the tables stay narrow enough to read."""
    match = _INTERVAL.match(text)
    if match is None:
        return escape(text)
    return f'{escape(match[1])}<br><span class="ci">{escape(match[2])}</span>'


def _table(table: Table, classes: Sequence[str] = (), title: bool = True) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in table.header)
    body = []
    for index, row in enumerate(table.rows):
        css = f' class="{classes[index]}"' if index < len(classes) and classes[index] else ""
        body.append(f"<tr{css}>" + "".join(f"<td>{_cell(c)}</td>" for c in row) + "</tr>")
    note = f'<p class="note">{escape(table.note)}</p>' if table.note else ""
    heading = f"<h3>{escape(table.title)}</h3>" if title else ""
    return f"{heading}<table><tr>{head}</tr>{''.join(body)}</table>{note}"


def _chart(chart: Chart) -> str:
    data = base64.b64encode(chart.png).decode("ascii")
    return f'<figure><img alt="{escape(chart.title)}" src="data:image/png;base64,{data}"></figure>'


def _generations(line: Mapping[str, Any]) -> str:
    parts = []
    for g in line.get("generations") or ():
        verdict = '<span class="ok">correct</span>' if g.get("correct") else '<span class="bad">wrong</span>'
        answer, stop = str(g.get("predicted_answer", g.get("answer"))), str(g.get("stop_reason"))
        text = str(g.get("text", ""))
        shown = text if len(text) <= MAX_TEXT else "…" + text[-MAX_TEXT:]
        parts.append(
            f'<div class="gen"><b>sample {g.get("sample_index")}</b>: {verdict}, answer '
            f"{escape(answer)}, stop {escape(stop)}"
            f"<pre>{escape(shown)}</pre></div>"
        )
    return "".join(parts)


def _change(change: Change, label: str, reference: str) -> str:
    line = change.current
    direction = "now solved" if change.now_solved else "no longer solved"
    counts = (
        f"{reference} {change.reference.get('num_correct')}/{len(change.reference.get('generations') or ())},"
        f" {label} {line.get('num_correct')}/{len(line.get('generations') or ())}"
    )
    return (
        f"<details><summary><code>{escape(change.problem_id)}</code>: {direction} "
        f"({escape(counts)})</summary>"
        f"<p><b>Problem.</b> {escape(str(line.get('problem', '')))}</p>"
        f"<p><b>Ground truth.</b> {escape(str(line.get('ground_truth')))}</p>"
        f"<h4>{escape(reference)}</h4>{_generations(change.reference)}"
        f"<h4>{escape(label)}</h4>{_generations(line)}</details>"
    )


def _suite(report: SuiteReport, charts: Sequence[Chart]) -> str:
    tables = suite_tables(report)
    classes = ["best" if r.best else "reference" if r.is_reference else "" for r in report.rows]
    parts = [f"<h2>{escape(report.name)}</h2>", _table(tables[0], classes, title=False)]
    parts += [_chart(c) for c in charts]
    parts += [_table(t) for t in tables[1:]]
    reference = next(r.label for r in report.rows if r.is_reference)
    for label, changes in report.changes.items():
        gained = sum(c.now_solved for c in changes)
        parts.append(
            f"<h3>Changed problems: {escape(label)} vs {escape(reference)}</h3>"
            f"<p>{gained} solved now and not in {escape(reference)}, {len(changes) - gained} the reverse"
            f"{'' if changes else ' (no problem changed)'}.</p>"
        )
        parts += [_change(c, label, reference) for c in changes]
    return "\n".join(parts)


def render(
    runs: Sequence[Run],
    reports: Sequence[SuiteReport],
    charts: Mapping[str, Sequence[Chart]],
    mixed: str | None = None,
    notes: Sequence[str] = (),
) -> str:
    """`notes`: lines shown under the list of files (a sweep's report says which model is
    the reference and which could not be read)."""
    files = "".join(f"<li><b>{escape(r.label)}</b>: <code>{escape(str(r.path))}</code></li>" for r in runs)
    warning = f'<p class="mixed"><b>Mixed runs</b> (--allow-mixed): {escape(mixed)}.</p>' if mixed else ""
    warning += "".join(f'<p class="note">{escape(note)}</p>' for note in notes)
    body = "\n".join(_suite(report, charts.get(report.name, ())) for report in reports)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>pytest-agenteval report</title><style>{CSS}</style></head><body>"
        f"<h1>pytest-agenteval report</h1><ul>{files}</ul>{warning}\n{body}\n</body></html>\n"
    )
