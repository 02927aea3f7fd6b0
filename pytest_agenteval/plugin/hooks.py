"""pytest glue: options, start-up checks, parametrisation, the evaluation fixture,
prefetching, and the controller that aggregates. Logic lives in the other modules."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.api.records import RECORD_KEY, Problem
from pytest_agenteval.api.suite import DataError
from pytest_agenteval.config import options
from pytest_agenteval.models import (
    SDK_SCHEMES,
    ModelChoice,
    choose_model,
    identity_warning,
)
from pytest_agenteval.models.cache_folder import run_cache_directory
from pytest_agenteval.models.choice import WORKERINPUT_KEY, served_choice
from pytest_agenteval.output.results import RESULTS_DIR
from pytest_agenteval.plugin import batching, checks, cost, hosts, progress, sequential, shards, sweep
from pytest_agenteval.plugin.evaluation import Evaluation, Unsolved, xfail_unsolved
from pytest_agenteval.plugin.items import (
    SUITE_ATTRIBUTE,
    UNSOLVED,
    apply_limits,
    in_use,
    problem_of,
    suite_files,
    suite_of,
    upcoming,
)
from pytest_agenteval.plugin.stealing import STEAL_LOCK
from pytest_agenteval.run.runtime import Runtime
from pytest_agenteval.tasks.bfcl_pin import bfcl_eval_version, version_warning
from pytest_agenteval.tasks.markers import MARKERS
from pytest_agenteval.tasks.registry import forget_suites, remember

pytest_plugins = (
    "pytest_agenteval.plugin.remote_args",  # the args xdist sends to remote workers
    "pytest_agenteval.plugin.quiet",  # no third-party warning on a user's run
)
RUNTIME = pytest.StashKey[Runtime]()
EVALUATING = pytest.StashKey[bool]()  # an evaluation run, on its controller
LAUNCH = pytest.StashKey[Any]()  # serving.session.Launch: the servers this run started
GATES = pytest.StashKey[list[Any]]()  # the parsed gates, checked again once the suites are known
PREFETCH_ITEMS_MIN = 2
# Finished rollouts an item ahead holds until pytest reaches it, at most this many times
# the engine's size: a head item that waits (a stall, a long generation) lets the rest run
# on, within a bound on what the process keeps.
LOOKAHEAD = 16


def pytest_addoption(parser: pytest.Parser) -> None:
    options.register(parser)


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _share(config: pytest.Config, total: int, per_host: bool = False) -> int:
    """This process's share of a limit that xdist workers split (at least 1): among
    every worker, or (per_host: a resource of the worker's own machine) among the
    workers of its host."""
    if not _is_worker(config):
        return total
    workerinput = config.workerinput  # type: ignore[attr-defined]
    if per_host and hosts.HOST_KEY in workerinput:
        index, count = workerinput[hosts.HOST_KEY]
    else:
        count = int(workerinput.get("workercount", 1))
        index = int(str(workerinput.get("workerid", "gw0")).lstrip("gw") or 0)
    return hosts.share(total, int(index), int(count))


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    forget_suites()  # a second session in this process (pytest.main again) starts afresh
    for name, description in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {description}")
    if config.option.help or getattr(config.option, "version", False):
        return
    settings = options.build_settings(config)
    checks.validate_settings(settings)
    cost.check_settings(settings)  # --prices, --max-cost, --max-total-tokens, --estimate-sample
    if _is_worker(config):  # paths as the controller resolved them (remote workers)
        settings = hosts.on_worker(settings, config.workerinput)  # type: ignore[attr-defined]
    gates = checks.check_gates(settings)
    config.stash[GATES] = gates
    progress.parse_mode(settings.progress)  # a bad value is a usage error before anything starts
    shards.install(config, settings)  # --agenteval-shard: checked here, split at collection
    if settings.bfcl_progressive is not None and getattr(config.option, "numprocesses", None):
        raise pytest.UsageError(
            "--bfcl-progressive decides each stage from the previous one in order: run it without -n"
        )
    evaluating = not _is_worker(config) and in_use(config, settings)
    config.stash[EVALUATING] = evaluating
    settings, choices = sweep.configure(
        config, settings, evaluating, run_cache_directory, _say, gates
    )  # sweeps
    sequential.install(config, settings, gates, bool(choices))  # --agenteval-sequential
    if choices:
        choice = next(iter(choices.values()))  # the reference model
    elif _is_worker(config):
        name = config.workerinput.get("agenteval_model_name")  # type: ignore[attr-defined]
        served = config.workerinput.get(WORKERINPUT_KEY)  # type: ignore[attr-defined]
        choice = served_choice(served) if served else _lazy_choice(settings, name)
        reported = config.workerinput.get("agenteval_model_reported")  # type: ignore[attr-defined]
        if reported and not served:  # the controller's /v1/models entries: the same cache key
            choice = dataclasses.replace(choice, reported=tuple(reported))
    elif evaluating:
        collect_only = config.option.collectonly
        cache = run_cache_directory(config, settings)
        choice = checks.check_model(settings, collect_only, cache / "sdk-home" if cache is not None else None)
        checks.check_suite_options(settings)  # before a launch that may take minutes
        if not collect_only:
            checks.check_output(settings)
            checks.check_sandbox_level(settings)
            choice = _start_servers(config, settings, choice)
        checks.check_native_style(settings, choice)
        hosts.check_concurrency(config, settings, choice)
    else:
        choice = _lazy_choice(settings, None)  # not an evaluation run: stay out of the way
    if evaluating:  # the controller's modules: a worker never imports them (start-up time)
        from pytest_agenteval.output.ci import CiOutputs
        from pytest_agenteval.output.compare import BaselineError
        from pytest_agenteval.plugin.controller import ResultsCollector
        from pytest_agenteval.plugin.trackers import install as install_trackers

        try:
            collector = ResultsCollector(config, settings, gates, choice, choices)
        except BaselineError as exc:
            raise pytest.UsageError(str(exc)) from None
        config.pluginmanager.register(collector, "agenteval-results")
        config.pluginmanager.register(CiOutputs(collector), "agenteval-ci")
        install_trackers(config, settings, collector)  # --agenteval-log
    cache_dir = run_cache_directory(config, settings)
    if evaluating and config.pluginmanager.hasplugin("xdist"):
        launched = config.stash.get(LAUNCH, None)
        config.pluginmanager.register(
            _XdistController(choice, settings, cache_dir, launched, choices), "agenteval-xdist"
        )
    sandbox_workers = settings.sandbox_workers or min(8, os.cpu_count() or 1)
    if choice.kind in SDK_SCHEMES:
        from pytest_agenteval.models.backends.sdk import close_sessions

        config.add_cleanup(close_sessions)  # sessions end with pytest, Ctrl-C included
    config.stash[RUNTIME] = Runtime(
        settings,
        choice,
        _share(config, settings.concurrency_ceiling, per_host=hosts.host_local(settings.endpoints)),
        cache_dir,
        _share(config, sandbox_workers, per_host=True),  # processes of this machine
        models=choices,
        model_ready=sweep.model_ready(choices),  # a sweep's later servers (waves)
    )
    cost.install(config, settings, choice, config.stash[RUNTIME], evaluating)  # budget ledger, --estimate
    progress.install(config, config.stash[RUNTIME], evaluating, settings.progress)
    batching.install(config, config.stash[RUNTIME], evaluating)  # --batch
    if _is_worker(config):
        from pytest_agenteval.plugin.stealing import install_worker_guard

        runtime = config.stash[RUNTIME]
        install_worker_guard(config, lambda: runtime.started_engine)


def _lazy_choice(settings: options.Settings, model_name: str | None) -> ModelChoice:
    """The model choice without start-up checks; a bad one surfaces as item errors."""
    try:
        return choose_model(
            settings.model_path,
            settings.endpoints,
            model_name or settings.model_name,
            base_model=settings.base_model,
            chat_template=settings.chat_template,
        )
    except ValueError as exc:
        return ModelChoice("invalid", model_name=str(exc))


def _start_servers(config: pytest.Config, settings: options.Settings, choice: ModelChoice) -> ModelChoice:
    """`--serve`: launch the run's server(s) here, on the controller, before xdist starts
    its workers; the workers get the URLs through workerinput and never launch."""
    if not settings.serve or choice.kind not in ("gguf", "embedded", "transformers"):
        return choice  # a transformers checkpoint without --serve was checked by checks.check_model
    from pytest_agenteval.models.serve.launcher import LaunchError
    from pytest_agenteval.models.serve.resolve import resolve_model_path
    from pytest_agenteval.models.serve.session import pick_backend, start

    hosts.refuse_remote_workers(config)
    cache = run_cache_directory(config, settings)
    try:
        source = settings.model_path or str(choice.path)
        hashes = cache / "model-hashes.json" if cache is not None else None
        resolved = resolve_model_path(
            source, base_model=settings.base_model, chat_template=settings.chat_template, hash_cache=hashes
        )
        backend = pick_backend(resolved, settings.serve_backend)
        if backend is None:  # --serve auto without vLLM/SGLang and a GPU
            _say("agenteval: no vLLM/SGLang with a GPU here: using the in-process transformers backend")
            checks.check_transformers(choice, settings)
            return choice
        out = (Path(os.path.expanduser(settings.out)).parent if settings.out else Path(RESULTS_DIR)).resolve()
        launch = start(settings, resolved, backend, out, cache or out, _say)
    except (LaunchError, ValueError) as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[LAUNCH] = launch
    for server in launch.servers:
        _say(
            f"agenteval: {server.spec.backend} server ready on {server.url} in {server.ready_s:.1f} s "
            f"(log {server.log_path})"
        )
    return served_choice(launch.workerinput())


def _say(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


@pytest.hookimpl(trylast=True)  # after pytest's own header
def pytest_sessionstart(session: pytest.Session) -> None:
    """Start-up lines of an evaluation run, on its controller, printed even with -q."""
    config = session.config
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if terminal is None or not config.stash.get(EVALUATING, False):
        return
    said = _weights_warning(config)
    if said:
        terminal.write_line(f"WARNING: {said}", yellow=True)
    line = version_warning(bfcl_eval_version())  # first: the suite files are read only when it differs
    texts = (path.read_text(encoding="utf-8", errors="replace").lower() for path in suite_files(config))
    if line and any("bfcl" in text for text in texts):
        terminal.write_line(f"WARNING: {line}", yellow=True)


def _weights_warning(config: pytest.Config) -> str | None:
    """--endpoint with the cache on and nothing that names the weights (models/identity.py)."""
    runtime = config.stash.get(RUNTIME, None)
    if runtime is None or config.option.collectonly:
        return None
    choice = runtime.choice
    if choice.kind != "openai" or choice.served is not None:
        return None  # a launched server's key has its weight files' hashes
    return identity_warning(
        choice.endpoints,
        choice.reported,
        str(choice.model_name),
        runtime.settings.model_revision or "",
        runtime.cache_dir is not None,
    )


def pytest_keyboard_interrupt(excinfo: Any) -> None:
    """trio:// and tinker:// sessions closed after a Ctrl-C are recorded as cancelled."""
    from pytest_agenteval.models.backends.sdk import mark_interrupted

    mark_interrupted()


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop the engine, model and sandbox last: the results are written by then."""
    runtime = config.stash.get(RUNTIME, None)
    if runtime is not None:
        for problem in runtime.close():
            sys.stderr.write(f"agenteval: while shutting down: {problem}\n")
    launch = config.stash.get(LAUNCH, None)
    if launch is not None:  # after the sampler: nothing is in flight any more
        for problem in launch.stop():
            sys.stderr.write(f"agenteval: while stopping the server: {problem}\n")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    suite = suite_of(metafunc.module)
    if suite is None or "problem" not in metafunc.fixturenames:
        return
    remember(suite)
    runtime = metafunc.config.stash[RUNTIME]
    try:
        problems = runtime.problems(suite)
    except DataError as exc:
        raise pytest.Collector.CollectError(f"agenteval: {exc}") from None
    if sweep.parametrize(metafunc, problems):  # a sweep: one item per (model, problem)
        return
    marks: dict[tuple[str, ...], tuple[pytest.MarkDecorator, ...]] = {}  # made once a marker set
    for p in problems:
        if p.markers not in marks:
            marks[p.markers] = tuple(getattr(pytest.mark, m) for m in p.markers)
    metafunc.parametrize("problem", [pytest.param(p, id=p.node_id, marks=marks[p.markers]) for p in problems])


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`--limit` and `--limit-per-category` apply after `-k` and `-m`."""
    runtime = config.stash.get(RUNTIME, None)
    if runtime is None:
        return
    kept, dropped = apply_limits(items, runtime.settings)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    if config.stash.get(EVALUATING, False):  # without xdist; with it, _XdistController checks
        suites = {s.name: s for item in items if (s := suite_of(getattr(item, "module", None))) is not None}
        checks.check_selected(config, runtime.settings, config.stash[GATES], suites, complete=True)


@pytest.fixture(scope="session")
def agenteval_agent() -> Any:
    """The agent under test for agent suites (GAIA). None: the default agent. Override it
    in your conftest.py with an async callable `task -> AgentResult`."""
    return None


@pytest.fixture
def evaluation(request: pytest.FixtureRequest, problem: Problem) -> Evaluation:
    """Generates and scores the item's N samples during setup, so a generation that
    cannot be produced is a pytest error, and a wrong answer a failure."""
    suite = suite_of(request.module)
    if suite is None:
        raise pytest.UsageError(f"{request.node.nodeid}: module has no `{SUITE_ATTRIBUTE}`")
    runtime = request.config.stash[RUNTIME]
    if suite.uses_agent:
        runtime.set_agent(suite, request.getfixturevalue("agenteval_agent"))
    admission = runtime.admission(suite, problem)
    if admission not in ("run", "wait"):
        pytest.skip(admission)
    item = request.node
    lock = request.config.stash.get(STEAL_LOCK, None) or contextlib.nullcontext()

    def refill() -> None:  # the window ahead slides on while this item waits
        with lock:
            _prefetch_ahead(runtime, item, refill=True)

    drawn = request.config.stash.get(sequential.STATE, None)
    if drawn is not None:  # --agenteval-sequential: the problem's draws (skipped if none)
        record = drawn.evaluate(runtime, suite, problem, item)
    else:
        record = runtime.evaluate(suite, problem, item.nodeid, refill)
    request.node.user_properties.append((RECORD_KEY, record.to_dict()))
    if runtime.fatal_error:  # retrying or going on cannot help: stop like -x
        request.session.shouldfail = f"agenteval: the server refused a request: {runtime.fatal_error}"
    if not record.complete:
        error = record.error or ""
        if error.startswith("BudgetExceeded: "):  # only the budget stopped it: its one line
            pytest.fail(error.removeprefix("BudgetExceeded: "), pytrace=False)
        pytest.fail(f"generation failed: {error}", pytrace=False)
    return Evaluation(record, suite)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    report = yield
    if call.when == "call" and report.failed and call.excinfo is not None:
        if isinstance(call.excinfo.value, Unsolved):  # travels to the xdist controller with the report
            setattr(report, UNSOLVED, True)
            runtime = item.config.stash.get(RUNTIME, None)
            if runtime is not None and (runtime.settings.gates or runtime.settings.compare):
                xfail_unsolved(report, call.excinfo.value)
    if call.when == "setup":  # the record travels once, with the setup report
        records = [p[1] for p in item.user_properties if p[0] == RECORD_KEY]
        item.user_properties[:] = [p for p in item.user_properties if p[0] != RECORD_KEY]
        if records and getattr(item.config.option, "xmlpath", None):  # junitxml: a small summary
            from pytest_agenteval.output.ci import item_properties

            item.user_properties.extend(item_properties(records[0]))
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Before pytest runs an item, start the rollouts of the items queued after it."""
    runtime = item.config.stash.get(RUNTIME, None)
    if runtime is None or suite_of(getattr(item, "module", None)) is None:
        return
    if sequential.STATE in item.config.stash:
        return  # the draws are made in a suite's first item, not item by item
    # Under xdist, no steal between reading this worker's queue and starting its items.
    with item.config.stash.get(STEAL_LOCK, contextlib.nullcontext()):
        _prefetch_ahead(runtime, item)


def _prefetch_ahead(runtime: Runtime, item: pytest.Item, refill: bool = False) -> None:
    """Start the rollouts of the items from `item` on until the engine has more unfinished
    ones than it runs at once. Finished rollouts of items pytest has not reached yet take
    no room, so the window slides past them, up to LOOKAHEAD x the engine's size held."""
    ahead, queued = upcoming(item)
    if queued is not None and not refill:
        runtime.forget(queued)
    engine = runtime.engine
    room, limit = engine.max_active, LOOKAHEAD * engine.max_active
    unfinished, held = engine.load()
    entries, seen = [], 0
    for order, other in ahead:
        suite, problem = suite_of(getattr(other, "module", None)), problem_of(other)
        if suite is None or problem is None:
            continue
        seen += 1
        if runtime.submitted(suite, problem) or not runtime.may_run_ahead(suite, problem):
            continue  # in the engine already (counted in its load), or not to run ahead
        if (unfinished > room and seen > PREFETCH_ITEMS_MIN) or held >= limit:
            break
        count = runtime.sample_count(suite, problem)
        entries.append((suite, problem, float(order)))
        unfinished, held = unfinished + count, held + count
    runtime.prefetch(entries)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Hand this process's request counters to the controller before it summarises."""
    runtime = session.config.stash.get(RUNTIME, None)
    if runtime is None:
        return
    counts = runtime.backend_counts()
    if _is_worker(session.config):
        session.config.workeroutput["agenteval_backend"] = counts  # type: ignore[attr-defined]
        session.config.workeroutput["agenteval_storage"] = runtime.storage_notes()  # type: ignore[attr-defined]
        session.config.workeroutput["agenteval_concurrency"] = runtime.concurrency_report()  # type: ignore[attr-defined]
    else:
        collector = session.config.pluginmanager.get_plugin("agenteval-results")
        if collector is not None:
            collector.add_backend_counts(counts)
            collector.add_storage_notes(runtime.storage_notes())
            collector.add_concurrency(runtime.concurrency_report(), "")


def _spec_in(specs: Any, spec: Any) -> Any:
    """The manager's own spec object for a gateway's spec (xdist may have rebuilt it)."""
    return next((s for s in specs if s is spec or getattr(s, "id", None) == getattr(spec, "id", 0)), spec)


class _XdistController:
    """Controller-side xdist hooks."""

    def __init__(
        self,
        choice: ModelChoice,
        settings: options.Settings,
        cache_dir: Path | None,
        launched: Any = None,
        choices: dict[str, ModelChoice] | None = None,
    ) -> None:
        self.choice = choice
        self.choices = choices or {}  # a sweep's models, label -> choice
        self.settings = settings
        self.cache_dir = cache_dir
        self.launched = launched  # serving.session.Launch, when this run launched its server
        self.checked = False  # the selection checks ran (on the first worker's collection)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        if not self.checked:  # the suites' modules, imported while nothing else draws
            checks.preload_suites(node.config)
        node.workerinput["agenteval_model_name"] = self.choice.model_name
        node.workerinput["agenteval_model_reported"] = [
            None if entry is None else dict(entry) for entry in self.choice.reported
        ]
        spec, manager = node.gateway.spec, node.nodemanager
        node.workerinput[hosts.HOST_KEY] = hosts.placement(manager.specs, _spec_in(manager.specs, spec))
        node.workerinput[hosts.PATHS_KEY] = hosts.worker_paths(
            self.settings, spec, manager.roots, self.cache_dir
        )
        if self.launched is not None:
            node.workerinput[WORKERINPUT_KEY] = self.launched.workerinput()
        if self.choices:
            sweep.fill_workerinput(node.workerinput, node.config.stash[sweep.MODELS], self.choices)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Any) -> None:
        """The first worker's collection names the selected suites: checked before the first item."""
        if not self.checked:
            found = checks.suites_of_ids(node.config, ids)
            checks.check_selected(node.config, self.settings, node.config.stash[GATES], *found)
        self.checked = True

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """Work stealing hands each worker a long queue up front, which it prefetches;
        plain `load` would feed it two items at a time. Steals take only items whose
        rollouts have not started (see `stealing`)."""
        if config.getoption("dist") != "load":
            return None
        from pytest_agenteval.plugin.steal_scheduler import PaidOnceStealing

        return PaidOnceStealing(config, log)
