"""CI-native outputs of a run: each item's record and each suite's headline metrics and
gate verdicts as JUnit properties (`--junitxml`; small, never texts), and the summary
and gate table appended to `$GITHUB_STEP_SUMMARY` when it is set."""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

PREFIX = "agenteval"
MAX_ERROR = 300  # characters of an item's error kept in its property
SUITE_METRICS = {
    "math": ("average_at_n", "pass_at_n", "format_rate", "maj_at_n"),
    "bfcl": ("accuracy", "lenient_accuracy", "weighted_accuracy", "error_rate"),
    "gaia": ("accuracy",),
}


def item_properties(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What one item's testcase carries: counts and stop reasons, the error if any."""
    generations = record.get("generations") or ()
    stops = Counter(str(g.get("stop_reason")) for g in generations)
    properties = [
        (f"{PREFIX}.num_correct", str(record.get("num_correct", 0))),
        (f"{PREFIX}.n", str(record.get("val_n", len(generations)))),
        (f"{PREFIX}.pass_at_n", str(bool(record.get("pass_at_n"))).lower()),
        (f"{PREFIX}.stop_reasons", ",".join(f"{k}={v}" for k, v in sorted(stops.items()))),
    ]
    if record.get("error"):
        properties.append((f"{PREFIX}.error", str(record["error"])[:MAX_ERROR]))
    return properties


def _number(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def suite_properties(
    summaries: Sequence[Mapping[str, Any]], gates: Sequence[Any], comparisons: Sequence[Any]
):
    """Suite-level properties: headline metrics, completeness, every gate and comparison."""
    from pytest_agenteval.report.analysis import suite_kind

    properties: list[tuple[str, str]] = []
    for summary in summaries:
        name = f"{PREFIX}.{suite_key(summary)}"
        properties += [
            (f"{name}.problems", str(summary.get("problems"))),
            (f"{name}.n", str(summary.get("val_n"))),
        ]
        for metric in SUITE_METRICS.get(suite_kind(summary), ()):
            if isinstance(summary.get(metric), (int, float)):
                properties.append((f"{name}.{metric}", _number(summary[metric])))
            elif metric in summary:  # null: nothing scored
                properties.append((f"{name}.{metric}", "n/a"))
        for category, values in (summary.get("per_category") or summary.get("per_level") or {}).items():
            properties.append((f"{name}.{category}.accuracy", _number(values.get("accuracy"))))
        properties.append((f"{name}.complete", str(bool(summary.get("complete"))).lower()))
        for field in ("incomplete", "not_scored"):  # why, when it is so
            if summary.get(field):
                properties.append((f"{name}.{field}", str(summary[field])))
    for index, result in enumerate(gates, 1):
        verdict = getattr(result, "verdict", "PASS" if result.passed else "FAIL")  # or UNDECIDED
        properties.append((f"{PREFIX}.gate.{index}", f"{verdict} {result.gate.expression} ({result.reason})"))
        if getattr(result, "decision", None) is not None:  # a gate with a confidence
            properties.append((f"{PREFIX}.gate.{index}.decision", result.decision))
            if result.interval is not None:
                low, high = result.interval
                properties.append((f"{PREFIX}.gate.{index}.interval", f"[{low:.4f}, {high:.4f}]"))
    for comparison in comparisons:
        verdict = comparison.verdict
        properties.append((f"{PREFIX}.compare.{comparison.suite}", f"{verdict} {comparison.reason}"))
    return properties


def verdict_cases(gates: Sequence[Any], comparisons: Sequence[Any]) -> list[tuple[str, str, bool]]:
    """(name, reason, passed) of each verdict that decides the run: one JUnit testcase each,
    so a dashboard is red exactly when the job is (the unsolved items it forgives are xfailed)."""
    cases = [(r.gate.expression, r.reason, r.passed) for r in gates]
    cases += [(f"baseline {c.suite}.{c.metric}", c.reason, c.passed) for c in comparisons]
    return cases


def add_suite_properties(
    path: Path, properties: Sequence[tuple[str, str]], verdicts: Sequence[tuple[str, str, bool]] = ()
) -> None:
    """Put the properties first in the <testsuite> pytest wrote (after its own, e.g.
    `record_testsuite_property`), and one testcase per verdict (`verdict_cases`) last,
    with the suite's counts, atomically."""
    import xml.etree.ElementTree as ET  # at the end of a --junitxml run only

    tree = ET.parse(path)
    suite = tree.getroot() if tree.getroot().tag == "testsuite" else tree.getroot().find("testsuite")
    if suite is None:
        return
    node = suite.find("properties")
    if node is None:
        node = ET.Element("properties")
        suite.insert(0, node)
    for name, value in properties:
        ET.SubElement(node, "property", name=name, value=value)
    for name, reason, passed in verdicts:
        case = ET.SubElement(suite, "testcase", classname=f"{PREFIX}.gate", name=name, time="0")
        if not passed:
            ET.SubElement(case, "failure", message=reason).text = f"{name}: {reason}"
            suite.set("failures", str(int(suite.get("failures", "0")) + 1))
        suite.set("tests", str(int(suite.get("tests", "0")) + 1))
    partial = path.with_name(path.name + ".partial")
    tree.write(partial, encoding="utf-8", xml_declaration=True)
    os.replace(partial, path)


def write_junit(
    path: Path,
    items: Sequence[tuple[Mapping[str, Any], str]],
    missing: Sequence[str],
    properties: Sequence[tuple[str, str]],
    verdicts: Sequence[tuple[str, str, bool]],
) -> None:
    """The JUnit file of a merge, as pytest's --junitxml (xunit2) writes a run's: one
    testcase per item (record, outcome: passed, failure, xfail or error) with its
    `item_properties`, one error per missing item, then `add_suite_properties`."""
    import xml.etree.ElementTree as ET

    from _pytest.junitxml import mangle_test_address

    root = ET.Element("testsuites", name="pytest tests")
    suite = ET.SubElement(root, "testsuite", name="pytest")
    counts = Counter()
    cases = [
        (str(data.get("nodeid")), outcome, item_properties(data), data.get("error"))
        for data, outcome in items
    ]
    cases += [(nodeid, "error", [], "missing: its shard produced no record") for nodeid in missing]
    for nodeid, outcome, props, error in cases:
        names = mangle_test_address(nodeid)
        case = ET.SubElement(suite, "testcase", classname=".".join(names[:-1]), name=names[-1], time="0")
        if props:
            node = ET.SubElement(case, "properties")
            for name, value in props:
                ET.SubElement(node, "property", name=name, value=value)
        if outcome == "xfail":
            ET.SubElement(case, "skipped", type="pytest.xfail", message="unsolved, a gate decides the run")
            counts["skipped"] += 1
        elif outcome == "failure":
            ET.SubElement(case, "failure", message="unsolved").text = f"{nodeid}: no correct generation"
            counts["failures"] += 1
        elif outcome == "error":
            message = f"failed on setup with {str(error)[:MAX_ERROR]}"
            ET.SubElement(case, "error", message=message).text = message
            counts["errors"] += 1
    for key in ("errors", "failures", "skipped"):
        suite.set(key, str(counts[key]))
    suite.set("tests", str(len(cases)))
    suite.set("time", "0")
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
    add_suite_properties(path, properties, verdicts)


def suite_key(summary: Mapping[str, Any]) -> str:
    """`aime25`, or in a sweep `aime25[step-200]` (the suite of one model, as gates name it)."""
    label = summary.get("model_label")
    return f"{summary['suite']}[{label}]" if label else str(summary["suite"])


def run_heading(summary: Mapping[str, Any]) -> str:
    """A suite's heading in the job summary: its mode and model, so two runs of one job
    (a matrix) can be told apart: `aime25 · retool · Qwen3-0.6B (llama)`."""
    model = summary.get("model") or {}
    name = model.get("name") or summary.get("base_model") or "model?"
    backend = f" ({model['backend']})" if model.get("backend") else ""
    parts = [
        suite_key(summary),
        *([str(summary["mode"])] if summary.get("mode") else []),
        f"{name}{backend}",
    ]
    return " · ".join(parts)


def step_summary(
    summaries: Sequence[Mapping[str, Any]], gates: Sequence[Any], comparisons: Sequence[Any]
) -> str:
    """The job summary: each suite's headline table, then the gates and the comparison."""
    from pytest_agenteval.report import build
    from pytest_agenteval.report.markdown import table_lines
    from pytest_agenteval.report.runs import Run, SuiteRun
    from pytest_agenteval.report.tables import headline_table

    lines = ["## pytest-agenteval", ""]
    by_model: dict[str, list[Mapping[str, Any]]] = {}  # a sweep: one table per (suite, model)
    for summary in summaries:
        by_model.setdefault(str(summary.get("model_label") or ""), []).append(summary)
    for group in by_model.values():
        label = str(group[0].get("model_label") or group[0].get("base_model") or "this run")
        run = Run(label, Path("."), {s["suite"]: SuiteRun(s, {}) for s in group})
        by_name = {s["suite"]: s for s in group}
        for report in build([run]):
            summary = by_name[report.name]
            table = headline_table(report)
            block = table_lines(dataclasses.replace(table, title=run_heading(summary)), "###")
            if not summary.get("complete", True):  # under the heading: a line after a table is a row
                block[2:2] = [
                    f"**INCOMPLETE**: {summary.get('incomplete') or 'not every problem was scored'}",
                    "",
                ]
            lines += block
    if gates or comparisons:
        lines += ["### Gates", "", "| Gate | Verdict | Value | Why |", "|---|---|---|---|"]
        for r in gates:
            value = "-" if r.value is None else f"{r.value:.4f}"
            lines.append(
                f"| `{r.gate.expression}` | {getattr(r, 'verdict', 'PASS' if r.passed else 'FAIL')} "
                f"| {value} | {r.reason} |"
            )
        for c in comparisons:
            verdict = c.verdict
            lines.append(f"| baseline `{c.suite}.{c.metric}` | {verdict} | {c.diff:+.4f} | {c.reason} |")
        lines.append("")
    return "\n".join(lines) + "\n"


class CiOutputs:
    """Runs after every `pytest_sessionfinish` implementation: the collector has the
    summaries and junitxml has written its file by then."""

    def __init__(self, collector: Any) -> None:
        self.collector = collector

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Iterator[None]:
        outcome = yield
        c = self.collector
        if not c.summaries and not c.gate_results:
            return outcome
        from _pytest.junitxml import xml_key

        xml = session.config.stash.get(xml_key, None)
        if xml is not None and Path(xml.logfile).is_file():
            add_suite_properties(
                Path(xml.logfile),
                suite_properties(c.summaries, c.gate_results, c.comparisons),
                verdict_cases(c.gate_results, c.comparisons),
            )
        target = os.environ.get("GITHUB_STEP_SUMMARY")
        if target:
            with open(target, "a", encoding="utf-8") as handle:
                handle.write(step_summary(c.summaries, c.gate_results, c.comparisons))
        return outcome
