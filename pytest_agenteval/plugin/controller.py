"""On the controller (or the only process): collect records from test reports, write
the results file, print the summary and let the gates decide the exit status."""

from __future__ import annotations

import functools
import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.api.records import RECORD_KEY, ProblemRecord, problem_from_dict, without_texts
from pytest_agenteval.config.options import Settings
from pytest_agenteval.models import ModelChoice, describe_model
from pytest_agenteval.models.cost.prices import billed_name
from pytest_agenteval.output import terminal as report
from pytest_agenteval.output.compare import Comparison, compare, load_baseline
from pytest_agenteval.output.concurrency import concurrency_lines, concurrency_summary
from pytest_agenteval.output.cost import cost_summary, device_count, price_record
from pytest_agenteval.output.gate import Gate, GateResult, evaluate_gate
from pytest_agenteval.output.results import ResultsFile, StoredRecords, default_out_path, package_versions
from pytest_agenteval.output.summary import (
    RunFacts,
    ShardFacts,
    harness_usage,
    iso_time,
    pack_record,
    suite_summary,
    unpack_record,
)
from pytest_agenteval.plugin.items import UNSOLVED, files_of_nodeid
from pytest_agenteval.plugin.sequential import STATE as SEQUENTIAL
from pytest_agenteval.plugin.shards import SHARD
from pytest_agenteval.tasks.registry import SuiteImportError, suite_by_name

CRASH_WHEN = "???"  # xdist's `when` for an item whose worker died


class ResultsCollector:
    def __init__(
        self,
        config: pytest.Config,
        settings: Settings,
        gates: Sequence[Gate],
        choice: ModelChoice,
        models: Mapping[str, ModelChoice] | None = None,
    ) -> None:
        self.config = config
        self.settings = settings
        self.gates = list(gates)
        self.choice = choice
        # a sweep's models, label -> choice in order (plugin/sweep_results.py); {} otherwise
        self.models: dict[str, ModelChoice] = dict(models or {})
        self.sweep: Any = None
        if self.models:
            from pytest_agenteval.plugin.sweep_results import SweepResults

            self.sweep = SweepResults(self)
        self.started = time.time()
        # nodeid -> its problem line without the texts, packed (about 60 bytes a generation):
        # what the summaries need; the whole line is in the results file's keeping (on disk)
        self.records: dict[str, bytes] = {}
        self.expected: list[str] = []
        self.infra_errors: dict[str, str] = {}  # nodeid -> why (errors without a record too)
        # nodeid -> phase, of every failure but an unsolved item's: no gate forgives them
        self.unforgivable: dict[str, str] = {}
        self.unsolved: set[str] = set()  # items scored with no correct generation
        self.skipped: set[str] = set()  # deliberately not run (progressive mode, no access)
        self.backend: dict[str, int] = {}  # request counters summed over processes
        self.concurrency: list[dict[str, Any]] = []  # --concurrency auto: each process's limits
        self.results_file = ResultsFile()
        self.out_path: Path | None = Path(settings.out) if settings.out else None
        self.summaries: list[dict[str, Any]] = []
        self.gate_results: list[GateResult] = []
        self.comparisons: list[Comparison] = []
        self.baseline = load_baseline(Path(settings.compare)) if settings.compare else None
        self._keys: dict[int, str] = {}  # id(record) -> nodeid, at the end
        self.written: Path | None = None
        self.write_failed = False  # the results file is not where it was asked for
        self.cache_notes: list[str] = []  # storage problems of every process's cache
        self.suite_error: str | None = None  # a suite module the controller could not import
        self.budget: Any = None  # the run's models.cost.budget.BudgetLedger, set by plugin/cost.py

    # -- what should run ---------------------------------------------------------------
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.expected = [item.nodeid for item in session.items]

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        if not self.expected:
            self.expected = list(ids)

    # -- what did run ------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Iterator[None]:
        """Takes the record first; once every other plugin has seen the report, drops the
        record from it: the terminal reporter keeps every report to the end of the run,
        and with the record in it the controller's memory would grow with the run."""
        self._take_record(report)
        try:
            return (yield)
        finally:
            if any(name == RECORD_KEY for name, _ in report.user_properties):
                report.user_properties = [p for p in report.user_properties if p[0] != RECORD_KEY]

    def _take_record(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == RECORD_KEY and report.nodeid not in self.records:
                if not self.records:
                    # What the summary needs (numpy, package metadata), loaded while the run
                    # waits on the server: not at start-up, where the import thread holds
                    # the GIL on the way to the first request (45 ms with -n 0).
                    threading.Thread(target=_warm_up, name="agenteval-warm-up", daemon=True).start()
                label = value.get("model", "")  # a sweep's model, "" otherwise
                price_record(value, self.settings, self.models.get(label, self.choice))  # its cost_usd
                self.records[report.nodeid] = pack_record(without_texts(value))
                if self.sweep is not None:  # each model's own results file
                    self.sweep.stream(label, report.nodeid, value)
                else:
                    self.results_file.stream(self._partial_target(value["suite"]), report.nodeid, value)
                if value.get("error"):
                    self.infra_errors[report.nodeid] = value["error"]
        if report.failed and report.when != "call":
            self.infra_errors.setdefault(report.nodeid, _error_line(report.longreprtext))
        if report.failed and not getattr(report, UNSOLVED, False):
            self.unforgivable.setdefault(report.nodeid, report.when)
        if getattr(report, UNSOLVED, False):  # failed, or xfailed because a gate was given
            self.unsolved.add(report.nodeid)
        if report.skipped and not getattr(report, UNSOLVED, False):  # an unsolved item xfailed ran
            self.skipped.add(report.nodeid)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A collection error (kept going past with --continue-on-collection-errors)."""
        if report.failed:
            self.unforgivable.setdefault(report.nodeid or ".", "collection")

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        output = getattr(node, "workeroutput", {})
        self.add_backend_counts(output.get("agenteval_backend", {}))
        self.add_storage_notes(output.get("agenteval_storage", []))
        self.add_concurrency(output.get("agenteval_concurrency", []), node.gateway.id)

    def add_storage_notes(self, notes: Sequence[str]) -> None:
        """Cache problems of a process (workers share a folder: say each once)."""
        self.cache_notes.extend(n for n in notes if n not in self.cache_notes)

    @property
    def storage_notes(self) -> list[str]:
        return (
            self.cache_notes + self.results_file.notes + (self.sweep.notes if self.sweep is not None else [])
        )

    def add_backend_counts(self, counts: Mapping[str, int]) -> None:
        """Sum the processes' request counters (a crashed worker's are lost: the
        per-generation `attempts` and `retries` in the records are the complete account)."""
        for key, value in counts.items():
            self.backend[key] = self.backend.get(key, 0) + value

    def add_concurrency(self, reports: Sequence[Mapping[str, Any]], worker: str) -> None:
        self.concurrency.extend({**report, "worker": worker} for report in reports)

    def pytest_report_teststatus(self, report: pytest.TestReport) -> tuple[str, str, str] | None:
        if report.when == CRASH_WHEN and report.failed:
            return "error", "E", "ERROR"  # a dead worker is infrastructure, not a wrong answer
        return None

    def _partial_target(self, suite: str) -> Path:
        if self.out_path is None:
            self.out_path = default_out_path([suite], self.choice.label, self.started)
        return self.out_path

    # -- the end -----------------------------------------------------------------------
    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        try:
            by_suite = self._by_suite()
        except SuiteImportError as exc:
            self._no_summary(session, str(exc))
            return
        stopped = session.exitstatus == pytest.ExitCode.USAGE_ERROR  # a start-up check after collection
        if self.config.option.collectonly or stopped or (not by_suite and not self.gates):
            self.results_file.close()  # listing items is not an evaluation: no file, no gate
            return
        missing = self._missing()
        interrupted = session.exitstatus == pytest.ExitCode.INTERRUPTED
        drawn = self.config.stash.get(SEQUENTIAL, None)
        if drawn is not None:  # what every finished draw cost, priced as the problems' lines are
            drawn.price = lambda data, label: price_record(
                data, self.settings, self.models.get(label, self.choice)
            )
        if self.sweep is not None:  # per (suite, model): plugin/sweep_results.py
            self.sweep.finish(by_suite, missing, interrupted)
            self._mark_for_last_failed(missing)
            self._decide_exit(session)  # once, over every model's summaries and gates
            return
        self.summaries = self.suite_summaries(by_suite, missing, interrupted)
        self.gate_results = [evaluate_gate(g, {s["suite"]: s for s in self.summaries}) for g in self.gates]
        if drawn is not None:  # --agenteval-sequential: the draws, replayed in order, decide
            self.gate_results = drawn.finish(self.gates, self.summaries)
        if self.baseline is not None and drawn is not None:  # paired draws where the baseline has them
            self.comparisons = drawn.comparisons(by_suite)
        elif self.baseline is not None:
            self.comparisons = [
                compare(name, records, self.baseline, self.settings.compare_tolerance, self.settings.seed)
                for name, records in sorted(by_suite.items())
            ]
        for summary in self.summaries:
            summary["gates"] = [r.as_dict() for r in self.gate_results if r.gate.suite == summary["suite"]]
            summary["compare"] = next(
                (c.as_dict() for c in self.comparisons if c.suite == summary["suite"]), None
            )
        if by_suite:
            self._write(by_suite)
        self._mark_for_last_failed(missing)
        self._decide_exit(session)

    def _by_suite(self) -> dict[str, list[ProblemRecord]]:
        """The records (without the texts) of each suite, read with the suite's own fields."""
        by_suite: dict[str, list[ProblemRecord]] = defaultdict(list)
        keys: dict[int, str] = {}  # id(record) -> its nodeid, to read the whole line back
        for nodeid, packed in self.records.items():
            data = unpack_record(packed)
            sources = files_of_nodeid(self.config, nodeid.split("::")[0])
            suite = suite_by_name(data["suite"], sources[0] if sources else None)
            record = problem_from_dict(data, suite.score_fields)
            by_suite[data["suite"]].append(record)
            keys[id(record)] = nodeid
        self._keys = keys
        return by_suite

    def _no_summary(self, session: pytest.Session, error: str) -> None:
        """A suite without its own code cannot be summarised: an error, not a generic
        summary. The finished items stay in the partial file and the generation cache."""
        self.results_file.close()
        kept = [str(self.results_file.partial)] if self.results_file.partial else []
        if not self.settings.no_cache:
            kept.append("the generation cache (a rerun requests nothing again)")
        self.suite_error = f"{error}; no summary, gate or results file" + (
            f": the finished items are in {' and '.join(kept)}" if kept else ""
        )
        self._mark_for_last_failed(self._missing())
        if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _mark_for_last_failed(self, missing: Sequence[str]) -> None:
        """Items that never produced a record (Ctrl-C, a crash) count as failed for
        `--lf`, so `pytest --lf` finishes the run from the generation cache."""
        cache = getattr(self.config, "cache", None)
        if cache is None or not missing:
            return
        lastfailed = dict(cache.get("cache/lastfailed", {}))
        lastfailed.update(dict.fromkeys(missing, True))
        cache.set("cache/lastfailed", lastfailed)

    def _missing(self) -> list[str]:
        """Expected items of agenteval files that produced no record."""
        files = {nodeid.split("::")[0] for nodeid in self.records}
        return [
            n
            for n in self.expected
            if n not in self.records and n not in self.skipped and n.split("::")[0] in files
        ]

    def suite_summaries(
        self,
        by_suite: Mapping[str, list[ProblemRecord]],
        missing: list[str],
        interrupted: bool,
        choice: ModelChoice | None = None,
        settings: Settings | None = None,
        whole: Any = None,
    ) -> list[dict[str, Any]]:
        """Each suite's summary, of the run's model or (a sweep) of `choice` run with
        `settings`, whose records `whole` reads back."""
        choice, settings = choice or self.choice, settings or self.settings
        finished = time.time()
        run = RunFacts(
            base_model=choice.model_name or choice.label,
            model=describe_model(choice, settings),
            keyword=self.config.getoption("keyword", "") or None,
            markexpr=self.config.getoption("markexpr", "") or None,
            backend=self.backend,
            storage=self.storage_notes,
            workers=getattr(self.config.option, "numprocesses", None) or 0,
            versions=package_versions(),
            harness=harness_usage(),
            started_at=iso_time(self.started),
            finished_at=iso_time(finished),
            duration_s=round(finished - self.started, 3),
            concurrency=concurrency_summary(self.concurrency, self.started),  # output/concurrency.py
            cost=functools.partial(
                cost_summary,
                settings=settings,
                billed_as=billed_name(choice),
                # an in-process model is loaded by every xdist worker: one device each
                devices=device_count(
                    settings, choice, getattr(self.config.option, "numprocesses", None) or 1
                ),
                duration_s=finished - self.started,
                ledger=self.budget,
            ),
        )
        state = self.config.stash.get(SHARD, None)
        shard = None
        if state is not None:
            shard = ShardFacts(state.index, state.count, state.selected, state.selection, list(self.expected))
        return [
            suite_summary(
                name,
                sorted(records, key=lambda r: r.index),
                whole or self._whole,
                missing,
                interrupted,
                settings,
                run,
                shard,
            )
            for name, records in sorted(by_suite.items())
        ]

    def nodeid_of(self, record: ProblemRecord) -> str:
        """The item a record (of `_by_suite`'s) came from: the key of its whole line on disk."""
        return self._keys[id(record)]

    def _whole(self, records: Sequence[ProblemRecord]) -> StoredRecords:
        """The same records with their texts, read back from disk one at a time."""

        def decode(data: Mapping[str, Any]) -> ProblemRecord:
            return problem_from_dict(data, suite_by_name(data["suite"]).score_fields)

        return StoredRecords(self.results_file, [self.nodeid_of(r) for r in records], decode)

    def _write(self, by_suite: Mapping[str, list[ProblemRecord]]) -> None:
        path = (
            self.out_path
            if self.settings.out
            else default_out_path(by_suite, self.choice.label, self.started)
        )
        records = self._whole(
            [r for name in sorted(by_suite) for r in sorted(by_suite[name], key=lambda r: r.index)]
        )
        hint = None if self.settings.no_cache else "the generation cache"
        if hint and self.settings.cache_dir:
            hint += f" in {self.settings.cache_dir}"
        recover = f"{hint} (rerun the same command: nothing finished is requested again)" if hint else ""
        self.written = self.results_file.finalize(path, records, self.summaries, recover)
        self.write_failed = self.written != path

    def _decide_exit(self, session: pytest.Session) -> None:
        if self.write_failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # the asked-for file is missing
            return
        if any("FatalRequestError" in error for error in self.infra_errors.values()):
            # a refused request stopped the run like -x: the same status with or without xdist
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
        if not self.gates and self.baseline is None:
            return  # plain pytest semantics
        if not self.gates and self.comparisons and not any(c.decided for c in self.comparisons):
            # a comparison too small to decide is no verdict: the status a run without it
            # would have, where an unsolved item (xfailed while a verdict was expected) fails
            if self.unsolved and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
        if session.exitstatus not in (
            pytest.ExitCode.OK,
            pytest.ExitCode.TESTS_FAILED,
            pytest.ExitCode.NO_TESTS_COLLECTED,
        ):
            return  # interrupted, internal or usage errors keep their own status
        # A gate forgives unsolved items only: any other failure keeps the run red.
        complete = all(s["complete"] for s in self.summaries)
        healthy = complete and not self.infra_errors and not self.unforgivable and not self.write_failed
        verdicts = [r.passed for r in self.gate_results] + [c.passed for c in self.comparisons if c.decided]
        passed = bool(verdicts) and all(verdicts)
        session.exitstatus = pytest.ExitCode.OK if healthy and passed else pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not (
            self.summaries or self.gate_results or self.comparisons or self.storage_notes or self.suite_error
        ):
            return
        terminalreporter.section("agenteval")
        if self.suite_error:
            terminalreporter.write_line(f"ERROR: {self.suite_error}", red=True, bold=True)
        lines = (
            self.sweep.terminal_lines()
            if self.sweep is not None
            else report.run_lines(self.summaries, self.gate_results, self.comparisons)
        )
        for line in lines:
            terminalreporter.write_line(line)
        for line in concurrency_lines(self.summaries[0].get("concurrency") if self.summaries else None):
            terminalreporter.write_line(line)
        if self.infra_errors and (self.gates or self.comparisons):
            terminalreporter.write_line(
                f"infrastructure errors in {len(self.infra_errors)} item(s): gates fail closed"
            )
        others = [n for n in self.unforgivable if n not in self.infra_errors]
        if others and (self.gates or self.comparisons):
            terminalreporter.write_line(_unforgiven_line(others, self.unforgivable))
        for note in self.storage_notes:
            terminalreporter.write_line(f"storage: {note}")
        for path in self.sweep.written.values() if self.sweep is not None else [self.written]:
            if path:
                terminalreporter.write_line(f"results: {path}")
        if self.sweep is not None and self.sweep.report is not None:
            terminalreporter.write_line(f"report: {self.sweep.report}")


def _warm_up() -> None:
    from pytest_agenteval.api import metrics  # noqa: F401 - numpy, for the summary's metrics

    package_versions()


def _unforgiven_line(nodeids: Sequence[str], phases: Mapping[str, str]) -> str:
    """Failures that are not unsolved items, which a passing gate does not forgive."""
    shown = ", ".join(f"{n} ({phases[n]})" for n in nodeids[:3])
    more = f" and {len(nodeids) - 3} more" if len(nodeids) > 3 else ""
    return f"failed otherwise (gates forgive only unsolved problems): {shown}{more}"


def _error_line(text: str) -> str:
    """The line of a failure report that names the error (its last non-empty one)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "error"
