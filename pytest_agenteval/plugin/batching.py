"""`--batch`: before the first item runs, the requests of every selected item go out as
OpenAI Batch API batches and their replies fill the generation cache (models/cost/batch.py);
the items then run as usual and read everything from the cache. Checked at start-up:
an --endpoint model, the cache on, no budget (a batch bypasses its ledger) and no multi-turn
suite selected (one line each).

The requests are the ones the items would send: each item's rollout runs while
`collecting_requests` is set, so every caching sampler that misses (the run's model's,
a judge's) records its request's body and cache key and stops there; a batch then holds
exactly the bodies and keys of a live run, one batch per suite on each endpoint. Under
xdist every worker collects every item; the first to take the cache folder's lock sends
and collects the batches, the others then find the replies in the cache."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.api.records import Problem, sample_seed
from pytest_agenteval.api.sampler import collecting_requests, served_by
from pytest_agenteval.api.suite import RolloutContext, Suite
from pytest_agenteval.models.cache import batch_run, set_batch_run
from pytest_agenteval.models.cost.batch import (
    BatchClient,
    BatchError,
    BatchFill,
    BatchLedger,
    BatchReport,
    BatchRequest,
)
from pytest_agenteval.models.keys import api_key_from_env
from pytest_agenteval.plugin.items import declares_suite, files_of_nodeid, problem_of, suite_of
from pytest_agenteval.run.runtime import Runtime
from pytest_agenteval.tasks.registry import SuiteImportError, builtin_kind, suite_of_file

PLUGIN_NAME = "agenteval-batch"
RUN_KEY = "agenteval_batch_run"  # workerinput: this run's token (models/cache.set_batch_run)


def install(config: pytest.Config, runtime: Runtime, evaluating: bool) -> None:
    """With --batch: check the model and the cache (one line each), then register the hooks."""
    settings = runtime.settings
    if not settings.batch or config.option.help:
        return
    if settings.batch_poll_interval <= 0:
        raise pytest.UsageError(
            f"--batch-poll-interval must be > 0 seconds, got {settings.batch_poll_interval:g}"
        )
    choice = runtime.choice
    if choice.kind != "openai" or choice.served is not None:
        raise pytest.UsageError(
            "--batch sends the requests to an OpenAI-compatible Batch API: it needs --endpoint URL; "
            "in-process and launched (--model-path, --serve) models have none: drop --batch"
        )
    if runtime.cache_dir is None:
        raise pytest.UsageError(
            "--batch brings the replies back through the generation cache: "
            "drop --agenteval-no-cache (or --batch)"
        )
    if settings.max_cost is not None or settings.max_total_tokens is not None:
        raise pytest.UsageError(
            "--batch sends its requests outside the budget ledger, so --max-cost and --max-total-tokens "
            "would not bound them: drop the budget (or --batch)"
        )
    workerinput = getattr(config, "workerinput", None)
    token = workerinput.get(RUN_KEY) if workerinput is not None else None
    # what this run's batches answer is paid by this run (`via: batch`), not a cache hit
    set_batch_run(token or uuid.uuid4().hex)
    config.add_cleanup(lambda: set_batch_run(None))
    config.pluginmanager.register(BatchPlugin(runtime, evaluating), PLUGIN_NAME)


def multi_turn(suite: Suite, problem: Problem, mode: str) -> str | None:
    """What makes an item multi-turn (and unfit for a batch), or None."""
    kind = builtin_kind(suite)
    if kind == "aime25" and mode == "retool":
        return f"{suite.name} in retool mode"
    if kind == "gaia":
        return f"{suite.name} (an agent)"
    if kind == "bfcl":
        from pytest_agenteval.tasks.bfcl.suite import EXECUTABLE

        if isinstance(problem.payload, EXECUTABLE):
            return f"{suite.name} category {problem.payload.category}"
    return None


def refusal(selected: Iterable[tuple[Suite, Problem]], mode: str) -> str | None:
    """The one line --batch stops on when a selected item is multi-turn, naming the fix."""
    found = list(dict.fromkeys(r for s, p in selected if (r := multi_turn(s, p, mode)) is not None))
    if not found:
        return None
    fixes = []
    if any("retool" in r for r in found):
        fixes.append("pass --mode text-only for AIME")
    if any("category" in r for r in found):
        fixes.append("select single-turn BFCL categories (e.g. -m 'not multi_turn and not agentic')")
    if any("agent" in r for r in found):
        fixes.append("deselect GAIA")
    shown = ", ".join(found[:4]) + (f" (+{len(found) - 4} more)" if len(found) > 4 else "")
    return (
        f"--batch sends single-turn requests only, and {shown} {'is' if len(found) == 1 else 'are'} "
        "multi-turn: "
        f"{'; '.join(fixes)}, or drop --batch"
    )


@dataclass
class Gathered:
    """The requests the selected items will send, and for each (by its cache key) the
    caching sampler that will look for its reply (the run's model's, or a judge's)."""

    requests: dict[str, dict[str, dict[str, BatchRequest]]] = field(default_factory=dict)  # endpoint, suite
    owners: dict[str, Any] = field(default_factory=dict)

    def add(self, suite: str, sampler: Any, key: str, body: dict[str, Any]) -> None:
        endpoint = sampler.inner.endpoints[0]  # where its batch goes
        self.requests.setdefault(endpoint, {}).setdefault(suite, {})[key] = BatchRequest(key, body)
        self.owners[key] = sampler


async def gather_requests(runtime: Runtime, selected: Iterable[tuple[Suite, Problem]]) -> Gathered:
    """Each rollout runs as its item would run it, while `collecting_requests` is set: a
    cache miss records its request (body and key) and stops there. On the engine's loop,
    where the run will use what this starts (a judge's clients, their negotiated modes)."""
    settings, gathered = runtime.settings, Gathered()
    for suite, problem in selected:
        if runtime.admission(suite, problem) != "run":
            continue
        samples = runtime.sample_count(suite, problem)
        for index in range(samples):
            seed = sample_seed(settings.seed, problem.id, index)
            sampling = suite.sampling(settings)
            ctx = RolloutContext(settings, runtime.sampler, problem, index, seed, runtime, sampling, samples)
            recorded: list[tuple[Any, str, dict[str, Any]]] = []
            before = asyncio.all_tasks()
            token, _ = collecting_requests.set(recorded), served_by.set({})
            try:
                await suite.rollout(ctx)
            except Exception:  # noqa: BLE001 - RequestCollected; anything else the item meets again
                pass
            finally:
                collecting_requests.reset(token)
            # calls the rollout made side by side (a judge's) record theirs too: wait for them
            others = asyncio.all_tasks() - before - {asyncio.current_task()}
            await asyncio.gather(*others, return_exceptions=True)
            for sampler, key, body in recorded:
                gathered.add(suite.name, sampler, key, body)
    return gathered


def fills(gathered: Gathered, runtime: Runtime, ledger: BatchLedger, say: Any) -> list[tuple[BatchFill, Any]]:
    """One BatchFill per endpoint (the run's model's, each judge's) and its requests by suite."""
    home = runtime.sampler  # where a reply no request of this run names goes (an earlier run's)

    def store(custom_id: str, completions: list[Any], n: int | None, batch_id: str) -> None:
        gathered.owners.get(custom_id, home).store(custom_id, completions, n, batch_id)

    def known(custom_id: str) -> bool:
        return custom_id in gathered.owners.get(custom_id, home).cache

    key, poll_s = api_key_from_env(runtime.settings.api_key_env), runtime.settings.batch_poll_interval
    return [
        (
            BatchFill(BatchClient(endpoint, key), ledger, store, known, say, poll_s),
            {suite: list(requests.values()) for suite, requests in by_suite.items()},
        )
        for endpoint, by_suite in gathered.requests.items()
    ]


def _selected(items: Iterable[pytest.Item]) -> Iterator[tuple[Suite, Problem]]:
    seen: set[tuple[str, str]] = set()
    for item in items:
        suite, problem = suite_of(getattr(item, "module", None)), problem_of(item)
        if suite is not None and problem is not None and (suite.name, problem.node_id) not in seen:
            seen.add((suite.name, problem.node_id))
            yield suite, problem


class BatchPlugin:
    def __init__(self, runtime: Runtime, evaluating: bool) -> None:
        self.runtime = runtime
        self.evaluating = evaluating  # the controller (or the only process)
        self.report = BatchReport()
        self._checked = False

    def _refuse(self, selected: Iterable[tuple[Suite, Problem]]) -> None:
        line = refusal(selected, self.runtime.settings.mode)
        if line is not None:
            raise pytest.UsageError(line)

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> Iterator[None]:
        yield  # after --limit and the other selections
        if self.evaluating:
            self._refuse(_selected(items))

    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        """Under xdist the controller has node ids only: the suites load their problems here."""
        if self._checked or not self.evaluating:
            return
        self._checked = True
        suites: dict[str, list[Suite]] = {}
        selected = []
        for nodeid in ids:
            name, _, test = nodeid.partition("::")
            if name not in suites:
                found = (_suite_of_path(path) for path in files_of_nodeid(node.config, name))
                suites[name] = [suite for suite in found if suite is not None]
            for suite in suites[name] if test.endswith("]") and "[" in test else ():
                problem = self._problems(suite).get(test.split("[", 1)[1][:-1])
                if problem is not None:
                    selected.append((suite, problem))
                    break
        self._refuse(selected)

    def _problems(self, suite: Suite) -> dict[str, Problem]:
        return {p.node_id: p for p in self.runtime.problems(suite)}

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[RUN_KEY] = batch_run()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        if session.config.option.collectonly or session.testsfailed or not session.items:
            return None
        say = _sayer(session.config)
        runtime = self.runtime
        selected = list(_selected(session.items))
        if refusal(selected, runtime.settings.mode) is not None:
            return None  # a worker: the controller refuses the run and stops it
        ledger = BatchLedger(runtime.cache_dir)  # type: ignore[arg-type]
        try:
            with ledger.locked():  # xdist: one worker gathers and sends, the others then find it cached
                runtime.sampler.cache.refresh()
                gathered = runtime.engine.run(gather_requests(runtime, selected))
                if gathered.requests:
                    self.report = asyncio.run(_run(fills(gathered, runtime, ledger, say)))
        except BatchError as exc:
            raise pytest.UsageError(
                f"--batch: {exc}; the endpoint may have no Batch API: drop --batch"
            ) from None
        except KeyboardInterrupt:
            say(f"stopped while waiting; the batches in flight are in {ledger.path}: a rerun collects them")
            raise
        for note in self.report.notes:
            say(note)
        return None

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        counts = {k: v for k, v in self.report.counts().items() if v}
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None:
            backend = workeroutput.setdefault("agenteval_backend", {})
            for key, value in counts.items():
                backend[key] = backend.get(key, 0) + value
            return
        collector = session.config.pluginmanager.get_plugin("agenteval-results")
        if collector is not None:
            collector.add_backend_counts(counts)


async def _run(fills: list[tuple[BatchFill, dict[str, list[BatchRequest]]]]) -> BatchReport:
    """Every endpoint's batches at once (the run's model and each judge's)."""
    try:
        reports = await asyncio.gather(*(fill.run(requests) for fill, requests in fills))
    finally:
        for fill, _ in fills:
            await fill.client.aclose()
    return BatchReport.total(reports)


def _suite_of_path(path: Path) -> Suite | None:
    if not path.is_file() or not declares_suite(path):
        return None
    try:
        return suite_of_file(path)
    except SuiteImportError:  # said at the summary
        return None


def _sayer(config: pytest.Config) -> Any:
    terminal = config.pluginmanager.get_plugin("terminalreporter")

    def say(line: str) -> None:
        if terminal is not None and not hasattr(config, "workerinput"):
            terminal.write_line(f"agenteval: {line}")
        else:
            sys.stderr.write(f"agenteval: {line}\n")
            sys.stderr.flush()

    return say
