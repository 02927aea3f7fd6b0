"""The end of a sweep on the controller: one summary block per (suite, model), one results
file per model, the unnamed gates applied to every model's block, and what the named gates
and the comparison report read (`summaries`, `scores`, `paths`: docs/sweeps.md)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_agenteval.api.records import ProblemRecord, problem_from_dict
from pytest_agenteval.models.sweep import SweepModel, item_label
from pytest_agenteval.output import terminal
from pytest_agenteval.output.gate import Gate, GateResult, evaluate_gate, evaluate_sweep_gate
from pytest_agenteval.output.results import ResultsFile, StoredRecords, default_out_path
from pytest_agenteval.plugin.sequential import STATE as SEQUENTIAL
from pytest_agenteval.plugin.sweep import MODELS, model_settings
from pytest_agenteval.plugin.sweep_servers import summary_choice
from pytest_agenteval.tasks.registry import suite_by_name

Key = tuple[str, str]  # (suite, model label)


def labelled_path(path: Path, label: str) -> Path:
    """--agenteval-out PATH in a sweep: PATH with `-LABEL` before the suffix
    (`out/run.jsonl` -> `out/run-step-200.jsonl`)."""
    return path.with_name(f"{path.stem}-{label}{path.suffix}")


class SweepResults:
    """The collector's sweep part (plugin/controller.py hands its records here)."""

    def __init__(self, collector: Any) -> None:
        self.collector = collector
        self.labels = list(collector.models)
        self.files: dict[str, ResultsFile] = {label: ResultsFile() for label in self.labels}
        self.targets: dict[str, Path] = {}
        # For the named gates and the comparison report (sweep-gates):
        self.summaries: dict[Key, dict[str, Any]] = {}  # (suite, label) -> its summary block
        # (suite, label) -> {problem id: [correct per generation]}: the paired comparison's
        self.scores: dict[Key, dict[str, list[bool]]] = {}
        self.written: dict[str, Path | None] = {}  # label -> its results file, in model order
        self.model_gates: dict[str, list[GateResult]] = {}  # label -> its unnamed gates' results
        self.report: Path | None = None  # the comparison report written at the end
        self.report_notes: list[str] = []

    # -- while the run goes on -----------------------------------------------------------
    def target(self, label: str, suites: Sequence[str]) -> Path:
        out = self.collector.settings.out
        if out:
            return labelled_path(Path(out), label)
        return default_out_path(suites, label, self.collector.started)

    def stream(self, label: str, nodeid: str, value: Mapping[str, Any]) -> None:
        if label not in self.targets:
            self.targets[label] = self.target(label, [value["suite"]])
        self.files[label].stream(self.targets[label], nodeid, value)

    @property
    def notes(self) -> list[str]:
        return [note for file in self.files.values() for note in file.notes] + self.report_notes

    @property
    def paths(self) -> list[Path]:
        """The results files written, in model order (the comparison report's input)."""
        return [path for path in self.written.values() if path is not None]

    # -- the end -------------------------------------------------------------------------
    def finish(
        self, by_suite: Mapping[str, list[ProblemRecord]], missing: list[str], interrupted: bool
    ) -> None:
        c = self.collector
        sources = {m.label: m.source for m in c.config.stash.get(MODELS, [])}
        per_label: dict[str, dict[str, list[ProblemRecord]]] = {}
        all_summaries: list[dict[str, Any]] = []
        for label, choice in c.models.items():
            choice = summary_choice(c.config, label, choice)  # a launched server: as it ran
            records = {
                name: [r for r in group if r.extra.get("model") == label] for name, group in by_suite.items()
            }
            records = {name: group for name, group in records.items() if group}
            if not records:
                continue  # deselected (-m, -k): no block, no file
            per_label[label] = records
            settings = model_settings(c.settings, SweepModel(label, sources.get(label, "")))
            own_missing = [n for n in missing if item_label(n, [label])]
            whole = functools.partial(self._whole, label)
            summaries = c.suite_summaries(records, own_missing, interrupted, choice, settings, whole)
            for summary in summaries:
                summary["model_label"] = label
                key = (summary["suite"], label)
                self.summaries[key] = summary
                self.scores[key] = {
                    str(r.problem_id): [bool(g.score.correct) for g in r.generations]
                    for r in sorted(records[summary["suite"]], key=lambda r: r.index)
                }
            all_summaries += summaries
        gate_results = []
        for label in per_label:
            blocks = {s: summary for (s, owner), summary in self.summaries.items() if owner == label}
            results = [evaluate_gate(g, blocks) for g in c.gates if applies_to_every_model(g)]
            self.model_gates[label] = results
            for summary in blocks.values():
                summary["gates"] = [r.as_dict() for r in results if r.gate.suite == summary["suite"]]
                summary["compare"] = None
            # the run's list names the model: one verdict per (gate, model)
            gate_results += [
                dataclasses.replace(
                    r, gate=dataclasses.replace(r.gate, expression=f"{r.gate.expression} [{label}]")
                )
                for r in results
            ]
        gate_results += self.named_gate_results()
        c.summaries, c.gate_results = all_summaries, gate_results
        for label, records in per_label.items():
            self._write(label, records)
        c.write_failed = any(
            self.written[label] != self.target_of(label, records) for label, records in per_label.items()
        )
        self.after_written()

    def named_gate_results(self) -> list[GateResult]:
        """Gates naming models (`aime25[step-200].average_at_n >= aime25[base].average_at_n`),
        evaluated on `self.summaries` and `self.scores` with the paired comparison
        (output/gate.py `evaluate_sweep_gate`); each result goes into the summary block of
        the model it names first, so the results file keeps the verdict."""
        seed = self.collector.settings.seed
        named = [g for g in self.collector.gates if not applies_to_every_model(g)]
        drawn = self.collector.config.stash.get(SEQUENTIAL, None)
        if drawn is not None:  # --agenteval-sequential: the draws, replayed in order, decide
            results = drawn.finish_sweep(named, self.summaries)
        else:
            results = [evaluate_sweep_gate(g, self.summaries, self.scores, seed) for g in named]
        for result in results:
            block = self.summaries.get((result.gate.suite, str(result.gate.label)))
            if block is not None:
                block.setdefault("gates", []).append(result.as_dict())
        return results

    def after_written(self) -> None:
        """Once every model's results file is written: the comparison report over them, in
        model order (`pytest-agenteval report`'s HTML: the checkpoint chart, paired deltas
        against the first model, the problems that changed). A report that cannot be
        written is a storage note: the results files are what the run promised."""
        written = [(label, path) for label, path in self.written.items() if path is not None]
        if len(written) < 2:
            return
        target = self.report_target()
        try:
            from pytest_agenteval.report import write_sweep_report

            self.report = write_sweep_report([p for _, p in written], [label for label, _ in written], target)
        except (OSError, ValueError) as exc:  # ReportError is a ValueError
            self.report_notes.append(f"could not write the sweep report {target}: {exc}")

    def report_target(self) -> Path:
        """--agenteval-out PATH: PATH-report.html beside the models' files; else
        agenteval-results/<suites>-sweep-<time>-<pid>.html."""
        out = self.collector.settings.out
        if out:
            return labelled_path(Path(out), "report").with_suffix(".html")
        suites = sorted({suite for suite, _ in self.summaries})
        return default_out_path(suites, "sweep", self.collector.started).with_suffix(".html")

    def target_of(self, label: str, records: Mapping[str, list[ProblemRecord]]) -> Path:
        return self.targets.get(label) or self.target(label, sorted(records))

    def _whole(self, label: str, records: Sequence[ProblemRecord]) -> StoredRecords:
        def decode(data: Mapping[str, Any]) -> ProblemRecord:
            return problem_from_dict(data, suite_by_name(data["suite"]).score_fields)

        nodeids = [self.collector.nodeid_of(r) for r in records]
        return StoredRecords(self.files[label], nodeids, decode)

    def _write(self, label: str, by_suite: Mapping[str, list[ProblemRecord]]) -> None:
        c = self.collector
        path = self.target_of(label, by_suite)
        records = self._whole(
            label, [r for name in sorted(by_suite) for r in sorted(by_suite[name], key=lambda r: r.index)]
        )
        summaries = [s for (_, owner), s in self.summaries.items() if owner == label]
        hint = None if c.settings.no_cache else "the generation cache"
        recover = f"{hint} (rerun the same command: nothing finished is requested again)" if hint else ""
        self.written[label] = self.files[label].finalize(path, records, summaries, recover)

    def terminal_lines(self) -> list[str]:
        """One block per model: its headline, its suites' blocks, its gates."""
        lines = terminal.cache_lines(self.collector.summaries)
        for label in self.model_gates:
            blocks = [s for (_, owner), s in self.summaries.items() if owner == label]
            lines.append(f"model {label}: " + "; ".join(headline(s) for s in blocks))
            for summary in blocks:
                lines += terminal.suite_block(summary, suite_by_name(summary["suite"]).summary_rows(summary))
            lines += terminal.gate_lines(self.model_gates[label])
        named = self.collector.gate_results[sum(len(r) for r in self.model_gates.values()) :]
        return lines + terminal.gate_lines(named)


def applies_to_every_model(gate: Gate) -> bool:
    """A gate naming no model (`aime25.average_at_n >= 0.3`) holds for each model's block."""
    return not getattr(gate, "labels", ())


def headline(summary: Mapping[str, Any]) -> str:
    """`aime25 average@4 0.250` (the suite's first metric: average@N where it has one)."""
    if "average_at_n" in summary:
        value = summary.get("average_at_n")
        shown = "n/a" if value is None else f"{value:.3f}"
        return f"{summary['suite']} average@{summary.get('val_n')} {shown}"
    return f"{summary['suite']} {summary.get('problems')} scored"
