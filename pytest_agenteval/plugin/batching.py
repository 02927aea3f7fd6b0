"""`--batch`: before the first item runs, the requests of every selected item go out as
OpenAI Batch API batches and their replies fill the generation cache (models/_batch.py);
the items then run as usual and read everything from the cache. Checked at start-up:
an --endpoint model, the cache on, and no multi-turn suite selected (one line each).

The requests are the ones the items would send: each suite's own `rollout` runs against a
stand-in sampler that records its first request (body and cache key) and stops there, so
a batch holds exactly the bodies and keys of a live run. Under xdist every worker collects
every item; the first to take the cache folder's lock sends and collects the batches, the
others then find the replies in the cache."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.api.records import Problem, sample_seed
from pytest_agenteval.api.suite import RolloutContext, Suite
from pytest_agenteval.models._batch import (
    BatchClient,
    BatchError,
    BatchFill,
    BatchLedger,
    BatchReport,
    BatchRequest,
)
from pytest_agenteval.models._keys import api_key_from_env
from pytest_agenteval.plugin.items import declares_suite, problem_of, suite_of
from pytest_agenteval.run.runtime import Runtime
from pytest_agenteval.tasks.registry import SuiteImportError, builtin_kind, suite_of_file

PLUGIN_NAME = "agenteval-batch"


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
            "--batch brings the replies back through the generation cache: drop --no-cache (or --batch)"
        )
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
        f"--batch sends single-turn requests only, and {shown} is multi-turn: "
        f"{'; '.join(fixes)}, or drop --batch"
    )


class _Collected(Exception):
    def __init__(self, request: BatchRequest | None) -> None:
        super().__init__("collected")
        self.request = request


class RequestCollector:
    """A sampler that records the request a rollout makes first and stops it there: the body
    the run's sampler would send and the cache key its reply would be kept under."""

    def __init__(self, caching: Any) -> None:
        self._caching = caching
        self._body = caching.inner.body  # OpenAISampler.body: what goes on the wire
        self.identity = caching.identity
        self.native_tools = caching.native_tools
        self.supports_n = caching.supports_n
        self.token_io = caching.token_io
        self.counter = None

    async def complete(
        self,
        messages: Sequence[Any],
        params: Any,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | None = None,
    ) -> Any:
        key = self._caching.chat_key(messages, params, tools, tool_choice)
        raise _Collected(BatchRequest(key, self._body(messages, params, tools, tool_choice)))

    async def complete_n(self, messages: Sequence[Any], params: Any, n: int) -> Any:
        raise _Collected(
            BatchRequest(self._caching.n_key(messages, params, n), {**self._body(messages, params), "n": n})
        )

    async def complete_tokens(self, prompt: Sequence[int], params: Any) -> Any:
        raise _Collected(None)  # token-in/token-out: /v1/completions, which a chat batch cannot carry

    def count_tokens(self, text: str) -> int:
        return int(self._caching.count_tokens(text))


class _Resources:
    """What a single-turn rollout may ask of the runtime while its request is collected."""

    def __init__(self, runtime: Runtime) -> None:
        self.cache_dir = runtime.cache_dir

    async def shared_request(self, key: Any, readers: int, request: Any) -> Any:
        return await request()


async def gather_requests(
    runtime: Runtime, selected: Iterable[tuple[Suite, Problem]]
) -> dict[str, list[BatchRequest]]:
    """Each selected item's requests by suite, as the run would send them, without duplicates."""
    collector, resources = RequestCollector(runtime.sampler), _Resources(runtime)
    settings = runtime.settings
    found: dict[str, dict[str, BatchRequest]] = {}
    for suite, problem in selected:
        if runtime.admission(suite, problem) != "run":
            continue
        samples = runtime.sample_count(suite, problem)
        for index in range(samples):
            seed = sample_seed(settings.seed, problem.id, index)
            ctx = RolloutContext(
                settings, collector, problem, index, seed, resources, suite.sampling(settings), samples
            )
            try:
                await suite.rollout(ctx)
            except _Collected as collected:
                if collected.request is not None:
                    found.setdefault(suite.name, {})[collected.request.custom_id] = collected.request
            except Exception:  # noqa: BLE001 - the item meets it again when it runs, and says so
                continue
    return {suite: list(requests.values()) for suite, requests in found.items()}


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

    def _refuse(self, config: pytest.Config, selected: Iterable[tuple[Suite, Problem]]) -> None:
        """Stop on a multi-turn item; say which selected suites' calls stay live."""
        selected = list(selected)
        line = refusal(selected, self.runtime.settings.mode)
        if line is not None:
            raise pytest.UsageError(line)
        for name in sorted({s.name for s, _ in selected if builtin_kind(s) == "datagen"}):
            _sayer(config)(f"WARNING: --batch does not batch {name}'s judge calls yet: they are sent live")

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> Iterator[None]:
        yield  # after --limit and the other selections
        if self.evaluating:
            self._refuse(config, _selected(items))

    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        """Under xdist the controller has node ids only: the suites load their problems here."""
        if self._checked or not self.evaluating:
            return
        self._checked = True
        suites: dict[str, Suite | None] = {}
        selected = []
        for nodeid in ids:
            name, _, test = nodeid.partition("::")
            if name not in suites:
                suites[name] = _suite_of_path(node.config.rootpath / name)
            suite = suites[name]
            if suite is not None and test.endswith("]") and "[" in test:
                problem = self._problems(suite).get(test.split("[", 1)[1][:-1])
                if problem is not None:
                    selected.append((suite, problem))
        self._refuse(node.config, selected)

    def _problems(self, suite: Suite) -> dict[str, Problem]:
        return {p.node_id: p for p in self.runtime.problems(suite)}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        if session.config.option.collectonly or session.testsfailed or not session.items:
            return None
        say = _sayer(session.config)
        runtime = self.runtime
        selected = list(_selected(session.items))
        if refusal(selected, runtime.settings.mode) is not None:
            return None  # a worker: the controller refuses the run and stops it
        requests = asyncio.run(gather_requests(runtime, selected))
        if not any(requests.values()):
            return None
        caching = runtime.sampler
        client = BatchClient(runtime.choice.endpoints[0], api_key_from_env(runtime.settings.api_key_env))
        ledger = BatchLedger(runtime.cache_dir)  # type: ignore[arg-type]
        fill = BatchFill(
            client,
            ledger,
            caching.store,
            caching.cache.__contains__,
            say,
            poll_s=runtime.settings.batch_poll_interval,
        )
        try:
            with ledger.locked():
                caching.cache.refresh()  # another worker may have filled it meanwhile
                self.report = asyncio.run(_run(fill, client, requests))
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


async def _run(
    fill: BatchFill, client: BatchClient, requests: Mapping[str, list[BatchRequest]]
) -> BatchReport:
    try:
        return await fill.run(requests)
    finally:
        await client.aclose()


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
