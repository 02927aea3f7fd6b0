"""`--agenteval-sequential`'s pytest glue: the start-up refusals, the run's shared folder of
draws (made by the controller, named to the xdist workers), each item's record built from
its problem's draws (`run/sequential.py` draws them, in the first item of a suite each
process runs), and, on the controller, the gates decided by replaying the draws in order.

Each item is still one problem: its record holds the draws of it the decision used (a
problem drawn three times has three generations), and an item whose problem the decision
never drew is skipped with the reason, neither passed nor failed."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.api.records import Problem, ProblemRecord
from pytest_agenteval.api.suite import Suite
from pytest_agenteval.config.options import Settings
from pytest_agenteval.plugin.items import problem_of, suite_of
from pytest_agenteval.run.sequential import (
    BUDGET,
    COST,
    DECIDED,
    ERROR,
    Decider,
    DrawLog,
    GateSpec,
    SuiteDraws,
)

STATE = pytest.StashKey["Sequential"]()
FOLDER_KEY = "agenteval_sequential"  # workerinput: the run's folder of draws
DRAWN_METRICS = ("average_at_n",)  # a mean of single generations' verdicts
DRAW_FIELDS = ("draw", "problem", "sample", "seed", "correct")


def _refuse(problem: str) -> None:
    raise pytest.UsageError(f"--agenteval-sequential: {problem}")


def check(config: pytest.Config, settings: Settings, gates: Sequence[Any], sweep: bool) -> None:
    """One line at start-up for what sequential mode cannot decide or cannot share."""
    if not gates:
        _refuse(
            "it stops when every gate is decided: add one, e.g. "
            '--agenteval-gate "aime25.average_at_n >= 0.4 @ 0.95"'
        )
    for gate in gates:
        if gate.labels or gate.other is not None or sweep:
            _refuse(
                f"{gate.expression!r}: gates on a sweep's models are not drawn sequentially yet; "
                "run without --agenteval-sequential"
            )
        if gate.confidence is None:
            _refuse(
                f"{gate.expression!r} has no level: a sequential gate is decided by its interval; "
                f'write "{gate.expression} @ 0.95" or pass --agenteval-gate-confidence 0.95'
            )
        if gate.metric not in DRAWN_METRICS:
            _refuse(
                f"{gate.expression!r}: {gate.metric} is not a mean of single draws; sequential gates "
                f"decide {', '.join(DRAWN_METRICS)} (drop --agenteval-sequential for a full run)"
            )
    others = [
        ("--agenteval-shard", settings.shard),
        ("--agenteval-compare", settings.compare),
        ("--batch", settings.batch),
        ("--bfcl-progressive", settings.bfcl_progressive is not None),
    ]
    for flag, value in others:
        if value:
            _refuse(f"{flag} decides what runs on its own; drop one of them")
    from pytest_agenteval.plugin import hosts

    hosts.refuse_remote_workers(
        config,
        "--agenteval-sequential: worker {tx} is on another machine; the draws are shared in a local folder",
    )


def check_suites(settings: Settings, gates: Sequence[Any], suites: Mapping[str, Suite]) -> None:
    """After collection: a selected suite without a gate has nothing to decide."""
    if not settings.sequential:
        return
    gated = {gate.suite for gate in gates}
    for name in sorted(suites):
        if name not in gated:
            _refuse(
                f"{name} is selected but has no gate, so nothing would stop its draws; gate it or deselect it"
            )


def install(config: pytest.Config, settings: Settings, gates: Sequence[Any], sweep: bool) -> None:
    if not settings.sequential:
        return
    check(config, settings, gates, sweep)
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        folder = Path(workerinput[FOLDER_KEY])
    else:
        folder = Path(tempfile.mkdtemp(prefix="agenteval-draws-"))
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
        if config.pluginmanager.hasplugin("xdist"):
            config.pluginmanager.register(_NameTheFolder(folder), "agenteval-sequential-xdist")
    config.stash[STATE] = Sequential(folder, gates)


class _NameTheFolder:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[FOLDER_KEY] = str(self.folder)


def specs(gates: Sequence[Any], suite: str) -> list[GateSpec]:
    return [
        GateSpec(g.expression, g.op, g.threshold, 1 - g.confidence)
        for g in gates
        if g.suite == suite and g.confidence is not None
    ]


class Sequential:
    """This process's sequential mode: the folder, the gates and each suite's draws."""

    def __init__(self, folder: Path, gates: Sequence[Any]) -> None:
        self.folder = folder
        self.gates = list(gates)
        self.suites: dict[str, SuiteDraws] = {}

    def evaluate(self, runtime: Any, suite: Suite, problem: Problem, item: pytest.Item) -> ProblemRecord:
        draws = self.suites.get(suite.name)
        if draws is None:
            population = [
                p
                for other in item.session.items
                if (s := suite_of(getattr(other, "module", None))) is not None
                and s.name == suite.name
                and (p := problem_of(other)) is not None
            ]
            draws = self.suites[suite.name] = SuiteDraws(
                runtime, suite, population, specs(self.gates, suite.name), self.folder
            )
        draws.run(*_slots(runtime, item.config))
        record = draws.record(problem, item.nodeid)
        if record is None:
            pytest.skip(f"not drawn: {_stopped(draws.decider, draws.budget)}")
        return record

    # -- on the controller, at the end -----------------------------------------------------
    def finish(self, gates: Sequence[Any], summaries: Sequence[dict[str, Any]]) -> list[Any]:
        """The gates' results, decided by replaying each suite's draws in order, and each
        summary's `sequential` block (the draws in order, the stop, the intervals)."""
        by_suite = {s["suite"]: s for s in summaries}
        results = []
        replays: dict[str, tuple[Decider, dict[str, Any], list[dict[str, Any]]]] = {}
        for name in dict.fromkeys(g.suite for g in gates):
            log = DrawLog(self.folder, name)
            log.refresh()
            plan = log.plan() or {"problems": 0, "samples": 0, "budget": 0}
            entries = log.ordered()
            decider = Decider(specs(gates, name), plan["budget"]).replay(_contiguous(log.entries))
            replays[name] = (decider, plan, entries)
            summary = by_suite.get(name)
            if summary is not None:
                summary["sequential"] = _block(decider, plan, entries)
                summary["val_n"] = plan["samples"]  # the full run's N (problems hold their draws)
        for gate in gates:
            results.append(_result(gate, replays[gate.suite], by_suite.get(gate.suite)))
        return results


def _slots(runtime: Any, config: pytest.Config) -> tuple[int, int]:
    """Draws in flight at once: (in this process, in the whole run). Its share of
    --concurrency per endpoint and the whole of it, or for an in-process model the engine's
    queue in each process."""
    endpoints = len(runtime.choice.endpoints)
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    if endpoints:
        return runtime.concurrency * endpoints, runtime.settings.concurrency_ceiling * endpoints
    return runtime.engine.max_active, runtime.engine.max_active * workers


def _contiguous(entries: Mapping[int, dict[str, Any]]) -> list[dict[str, Any]]:
    found, k = [], 0
    while k in entries:
        found.append(entries[k])
        k += 1
    return found


def _stopped(decider: Decider, budget: int) -> str:
    used = f"{decider.used:,} of {budget:,} draws"
    return {
        DECIDED: f"every gate was decided after {used}",
        BUDGET: f"the budget of {budget:,} draws was spent undecided",
        COST: f"the cost budget stopped the draws after {used}",
        ERROR: f"a draw failed after {used}: {decider.error}",
    }.get(decider.stop or "", f"the draws stopped after {used}")


def _block(decider: Decider, plan: Mapping[str, Any], entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {
        "stop": decider.stop,
        "reason": _stopped(decider, plan["budget"]),
        "draws_used": decider.used,
        "draws_full": plan["budget"],
        "draws_finished": sum(1 for e in entries if not e.get("error")),  # the ones after the stop too
        "problems": plan["problems"],
        "gates": [
            {
                "gate": spec.key,
                "decision": decider.decision(spec),
                "mean": decider.sequences[spec.key].mean,
                "interval": _interval(decider, spec.key),
                "confidence": round(1 - spec.alpha, 12),
            }
            for spec in decider.gates
        ],
        "draw_fields": list(DRAW_FIELDS),
        "draws": [[e["draw"], e["problem"], e["sample"], e["seed"], e["correct"]] for e in entries],
    }


def _interval(decider: Decider, key: str) -> list[float] | None:
    if decider.used == 0:
        return None
    found = decider.sequences[key].interval
    return [found.low, found.high]


def _result(gate: Any, replay: tuple[Decider, dict[str, Any], list[Any]], summary: Any) -> Any:
    from pytest_agenteval.output.gate import GateResult

    decider, plan, _ = replay
    spec = next(s for s in decider.gates if s.key == gate.expression)
    mean = decider.sequences[spec.key].mean
    found = GateResult(gate, False, mean, "", decision="FAIL", draws=decider.used, sequential=True)
    if summary is None or decider.used == 0 and decider.stop is None:
        return replace(found, reason=f"no draws of {gate.suite}: gates fail closed")
    if decider.stop == ERROR:
        return replace(found, reason=f"{_stopped(decider, plan['budget'])}: gates fail closed")
    if not summary.get("complete", False):
        why = summary.get("incomplete")
        return replace(found, reason=f"run incomplete{f' ({why})' if why else ''}: gates fail closed")
    decision = decider.decision(spec)
    interval = _interval(decider, spec.key)
    used, full = decider.used, plan["budget"]
    if decider.stop == DECIDED:
        tail = f"({1 - used / full:.0%} not needed)" if full else ""
    elif decider.stop == COST:
        tail = "(the cost budget stopped the draws: undecided)"
    else:
        tail = "(the whole budget: undecided)"
    shown = f"{mean:.2f} [{interval[0]:.2f}, {interval[1]:.2f}]" if mean is not None and interval else "n/a"
    reason = f"{shown} after {used:,} of {full:,} generations {tail}"
    return replace(
        found,
        passed=decision == "PASS",
        decision=decision,
        interval=(interval[0], interval[1]) if interval else None,
        reason=reason,
    )
