"""`--agenteval-log` glue: the targets checked at start-up on the controller (a missing
tracker package is a usage error naming its extra), the results logged once when the
session ends, after the results files are written, never by a worker nor by a shard
(`pytest-agenteval merge --agenteval-log` logs the whole). docs/trackers.md."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.config.options import Settings
from pytest_agenteval.output.results import RESULTS_DIR
from pytest_agenteval.output.trackers import ModelResults, Target, check_targets, log_results, read_markers
from pytest_agenteval.output.trackers.plan import single_model
from pytest_agenteval.plugin.shards import SHARD
from pytest_agenteval.plugin.sweep import MODELS

_SCANNED = 100  # the newest results files read for an already-logged marker


def install(config: pytest.Config, settings: Settings, collector: Any) -> None:
    """On the controller of an evaluating run: check the targets, register the logging."""
    if not settings.log_targets:
        return
    try:
        targets = check_targets(settings.log_targets)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.pluginmanager.register(TrackerLog(collector, targets, settings), "agenteval-trackers")


class TrackerLog:
    def __init__(self, collector: Any, targets: Sequence[Target], settings: Settings) -> None:
        self.collector, self.targets, self.settings = collector, list(targets), settings
        self.lines: list[str] = []

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Iterator[None]:
        """Around the collector's: the markers before it writes over a results file, the
        logging once it has written them all (the sweep's report too)."""
        previous = read_markers(self._candidates())
        outcome = yield
        c = self.collector
        if not c.summaries:
            return outcome
        if session.config.stash.get(SHARD, None) is not None:
            self.lines = [
                "a shard does not log (its numbers are partial): log the merged run with "
                "pytest-agenteval merge ... --agenteval-log URI"
            ]
            return outcome
        if session.exitstatus == pytest.ExitCode.INTERRUPTED:
            self.lines = ["interrupted: nothing logged; rerun the command to finish from the cache and log"]
            return outcome
        report = c.sweep.report if c.sweep is not None else None
        self.lines = log_results(self.targets, self._models(), report, self.settings.log_always, previous)
        return outcome

    @pytest.hookimpl(trylast=True)  # after the collector's section
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for line in self.lines:
            terminalreporter.write_line(f"agenteval: {line}", yellow=line.startswith("WARNING"))

    def _models(self) -> list[ModelResults]:
        c = self.collector
        if c.sweep is None:
            return [single_model(c.summaries, c.written)]
        steps = {m.label: m.step for m in c.config.stash.get(MODELS, [])}
        models = []
        for label, path in c.sweep.written.items():
            summaries = tuple(s for s in c.summaries if s.get("model_label") == label)
            if summaries:
                models.append(ModelResults(label, steps.get(label), summaries, path))
        return models

    def _candidates(self) -> list[Path]:
        """The results files a marker may be in: those --agenteval-out names (a sweep's
        labelled ones too), else the newest in agenteval-results/."""
        out = self.settings.out
        if out:
            path = Path(out)
            found = list(path.parent.glob(f"{path.stem}*{path.suffix}")) if path.parent.is_dir() else []
        else:
            found = list(Path(RESULTS_DIR).glob("*.jsonl")) if Path(RESULTS_DIR).is_dir() else []
        found.sort(key=lambda p: p.stat().st_mtime if p.exists() else 0, reverse=True)
        return found[:_SCANNED]
