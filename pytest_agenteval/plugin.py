"""pytest glue: options, start-up checks, parametrisation, the evaluation fixture,
prefetching, and the controller that aggregates. Logic lives in the other modules."""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from . import options
from .compare import BaselineError
from .controller import RECORD_KEY, ResultsCollector
from .gate import GateError, check_metric_name, parse_gate
from .markers import MARKERS
from .records import Problem, ProblemRecord
from .registry import KNOWN_METRICS, remember
from .results import check_writable, default_out_path
from .runtime import Runtime
from .samplers import ModelChoice, ReplayError, ReplaySource, choose_model, probe_endpoint
from .suite import DataError, Suite

RUNTIME = pytest.StashKey[Runtime]()
SUITE_ATTRIBUTE = "agenteval_suite"
PREFETCH_ITEMS_MIN = 2


def pytest_addoption(parser: pytest.Parser) -> None:
    options.register(parser)


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _concurrency_share(config: pytest.Config, total: int) -> int:
    """This process's share of the per-endpoint concurrency (xdist workers split it)."""
    if not _is_worker(config):
        return total
    workerinput = config.workerinput  # type: ignore[attr-defined]
    count = int(workerinput.get("workercount", 1))
    index = int(str(workerinput.get("workerid", "gw0")).lstrip("gw") or 0)
    return max(1, total // count + (1 if index < total % count else 0))


def _check_model(settings: options.Settings, collect_only: bool = False) -> ModelChoice:
    """Start-up checks of the model choice: one line naming the fix, never a traceback."""
    try:
        choice = choose_model(settings.model_path, settings.endpoints, settings.model_name)
        if collect_only:
            return choice  # listing items needs no model and no server
        if choice.kind == "openai":
            api_key = os.environ.get(settings.api_key_env)
            served = [probe_endpoint(url, api_key) for url in choice.endpoints][0]
            name = settings.model_name
            if name is None:
                if not served:
                    raise ValueError(f"{choice.endpoints[0]} lists no models; pass --model-name")
                name = served[0]
            elif served and name not in served:
                raise ValueError(
                    f"--model-name {name!r} is not served by {choice.endpoints[0]} "
                    f"(it serves: {', '.join(served)}); fix --model-name"
                )
            choice = ModelChoice("openai", endpoints=choice.endpoints, model_name=name)
        elif choice.kind == "replay":
            assert choice.path is not None
            ReplaySource(choice.path)
        else:
            import llama_cpp  # noqa: F401 - checked here so a missing build fails at start-up
    except ImportError as exc:
        raise pytest.UsageError(
            f"llama-cpp-python is not importable ({exc}); install it: pip install llama-cpp-python"
        ) from None
    except (ValueError, ReplayError) as exc:
        raise pytest.UsageError(str(exc)) from None
    return choice


def _check_gates(settings: options.Settings) -> list[Any]:
    try:
        gates = [parse_gate(expression) for expression in settings.gates]
        for gate in gates:
            check_metric_name(gate, KNOWN_METRICS)
    except GateError as exc:
        raise pytest.UsageError(str(exc)) from None
    return gates


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    for name, description in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {description}")
    if config.option.help or getattr(config.option, "version", False):
        return
    settings = options.build_settings(config)
    gates = _check_gates(settings)
    if settings.bfcl_progressive is not None and getattr(config.option, "numprocesses", None):
        raise pytest.UsageError(
            "--bfcl-progressive decides each stage from the previous one in order: run it without -n"
        )
    if _is_worker(config):
        name = config.workerinput.get("agenteval_model_name")  # type: ignore[attr-defined]
        choice = _lazy_choice(settings, name)
    elif in_use(config, settings):
        choice = _check_model(settings, collect_only=config.option.collectonly)
        _check_output(settings, choice)
    else:
        choice = _lazy_choice(settings, None)  # not an evaluation run: stay out of the way
    if not _is_worker(config):
        try:
            collector = ResultsCollector(config, settings, gates, choice)
        except BaselineError as exc:
            raise pytest.UsageError(str(exc)) from None
        config.pluginmanager.register(collector, "agenteval-results")
        if config.pluginmanager.hasplugin("xdist"):
            config.pluginmanager.register(_XdistController(choice), "agenteval-xdist")
    share = _concurrency_share(config, settings.concurrency)
    config.stash[RUNTIME] = Runtime(settings, choice, share, _cache_dir(config, settings))


def _lazy_choice(settings: options.Settings, model_name: str | None) -> ModelChoice:
    """The model choice without start-up checks; a bad one surfaces as item errors."""
    try:
        return choose_model(settings.model_path, settings.endpoints, model_name or settings.model_name)
    except ValueError as exc:
        return ModelChoice("invalid", model_name=str(exc))


def _check_output(settings: options.Settings, choice: ModelChoice) -> None:
    out = settings.out and os.path.expanduser(settings.out)
    target = out or str(default_out_path(["x"], choice.label, 0))
    try:
        check_writable(Path(target))
    except OSError as exc:
        raise pytest.UsageError(
            f"--agenteval-out {target}: not writable ({exc.strerror or exc}); choose a writable path"
        ) from None


def in_use(config: pytest.Config, settings: options.Settings) -> bool:
    """Is this run an evaluation? The plugin is installed for every pytest run in the
    environment; start-up checks (and their side effects) happen only when an agenteval
    option is set or a collected path holds a module that declares `agenteval_suite`."""
    if settings.explicit - {"seed"}:
        return True
    paths = [Path(arg.split("::")[0]) for arg in config.args] or [config.rootpath]
    patterns = config.getini("python_files") or ["test_*.py"]
    for path in paths:
        files = [path] if path.is_file() else [f for pattern in patterns for f in _walk(path, pattern)]
        if any(declares_suite(f) for f in files):
            return True
    return False


def _walk(folder: Path, pattern: str) -> Iterator[Path]:
    if not folder.is_dir():
        return
    for path in folder.rglob(pattern):
        if not any(
            part.startswith(".") or part in ("node_modules", "venv", "site-packages")
            for part in path.relative_to(folder).parts
        ):
            yield path


def declares_suite(path: Path) -> bool:
    """A module-level `agenteval_suite = ...` (a string mentioning it does not count)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    if SUITE_ATTRIBUTE not in text:
        return False
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == SUITE_ATTRIBUTE for t in targets):
            return True
    return False


def _cache_dir(config: pytest.Config, settings: options.Settings) -> Path | None:
    """--agenteval-cache-dir, else a folder in pytest's cache dir (.pytest_cache)."""
    if settings.no_cache:
        return None
    if settings.cache_dir:
        return Path(settings.cache_dir).expanduser()
    cache = getattr(config, "cache", None)
    if cache is not None:
        return Path(cache.mkdir("agenteval"))
    return config.rootpath / ".pytest_cache" / "d" / "agenteval"


def pytest_unconfigure(config: pytest.Config) -> None:
    runtime = config.stash.get(RUNTIME, None)
    if runtime is not None:
        runtime.close()


def _suite_of(module: Any) -> Suite | None:
    suite = getattr(module, SUITE_ATTRIBUTE, None)
    return suite if isinstance(suite, Suite) else None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    suite = _suite_of(metafunc.module)
    if suite is None or "problem" not in metafunc.fixturenames:
        return
    remember(suite)
    runtime = metafunc.config.stash[RUNTIME]
    try:
        problems = runtime.problems(suite)
    except DataError as exc:
        raise pytest.Collector.CollectError(f"agenteval: {exc}") from None
    metafunc.parametrize(
        "problem",
        [pytest.param(p, id=p.node_id, marks=[getattr(pytest.mark, m) for m in p.markers]) for p in problems],
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`--limit` and `--limit-per-category` apply after `-k` and `-m`: the first K selected
    problems of each suite (or category), in dataset order."""
    runtime = config.stash.get(RUNTIME, None)
    if runtime is None or not (runtime.settings.limit or runtime.settings.limit_per_category):
        return
    counts: dict[tuple[str, ...], int] = {}
    kept, dropped = [], []
    for item in items:
        suite, problem = _suite_of(getattr(item, "module", None)), _problem_of(item)
        keys = [] if suite is None or problem is None else _limit_keys(runtime.settings, suite, problem)
        if any(counts.get(key, 0) >= limit for key, limit in keys):
            dropped.append(item)
            continue
        for key, _ in keys:
            counts[key] = counts.get(key, 0) + 1
        kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _limit_keys(
    settings: options.Settings, suite: Suite, problem: Problem
) -> list[tuple[tuple[str, ...], int]]:
    keys = []
    if settings.limit:
        keys.append(((suite.name,), settings.limit))
    if settings.limit_per_category:
        keys.append(((suite.name, suite.category_of(problem)), settings.limit_per_category))
    return keys


def _problem_of(item: pytest.Item) -> Problem | None:
    callspec = getattr(item, "callspec", None)
    problem = callspec.params.get("problem") if callspec is not None else None
    return problem if isinstance(problem, Problem) else None


class Evaluation:
    """What the test body sees: the scored record of its N generations."""

    def __init__(self, record: ProblemRecord, suite: Suite) -> None:
        self.record = record
        self.suite = suite

    @property
    def passed(self) -> bool:
        return self.suite.item_passed(self.record)

    def check(self) -> None:
        """An item passes when at least one of its N generations is correct."""
        if not self.passed:
            pytest.fail(self.suite.failure_message(self.record), pytrace=False)


@pytest.fixture(scope="session")
def agenteval_agent() -> Any:
    """The agent under test for agent suites (GAIA). None: the default agent. Override it
    in your conftest.py with an async callable `task -> AgentResult`."""
    return None


@pytest.fixture
def evaluation(request: pytest.FixtureRequest, problem: Problem) -> Evaluation:
    """Generates and scores the item's N samples during setup, so a generation that
    cannot be produced is a pytest error, and a wrong answer a failure."""
    suite = _suite_of(request.module)
    if suite is None:
        raise pytest.UsageError(f"{request.node.nodeid}: module has no `{SUITE_ATTRIBUTE}`")
    runtime = request.config.stash[RUNTIME]
    if suite.uses_agent:
        runtime.set_agent(suite, request.getfixturevalue("agenteval_agent"))
    admission = runtime.admission(suite, problem)
    if admission not in ("run", "wait"):
        pytest.skip(admission)
    record = runtime.evaluate(suite, problem, request.node.nodeid)
    request.node.user_properties.append((RECORD_KEY, record.to_dict()))
    if runtime.fatal_error:  # retrying or going on cannot help: stop like -x
        request.session.shouldfail = f"agenteval: the server refused a request: {runtime.fatal_error}"
    if not record.complete:
        pytest.fail(f"generation failed: {record.error}", pytrace=False)
    return Evaluation(record, suite)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    report = yield
    if call.when == "setup":  # the record travels once, with the setup report
        item.user_properties[:] = [p for p in item.user_properties if p[0] != RECORD_KEY]
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Before pytest runs an item, start the rollouts of the items queued after it."""
    runtime = item.config.stash.get(RUNTIME, None)
    if runtime is None or _suite_of(getattr(item, "module", None)) is None:
        return
    upcoming, queued = _upcoming(item)
    if queued is not None:
        runtime.forget(queued)
    window = max(PREFETCH_ITEMS_MIN, runtime.engine.max_active // max(1, runtime.settings.val_n) + 1)
    entries = []
    for order, other in upcoming[: window + 1]:
        suite, problem = _suite_of(getattr(other, "module", None)), _problem_of(other)
        if suite is not None and problem is not None:
            entries.append((suite, problem, float(order)))
    runtime.prefetch(entries)


def _upcoming(item: pytest.Item) -> tuple[list[tuple[int, pytest.Item]], set[tuple[str, str]] | None]:
    """Items this process will run from `item` on, with their collection order; under
    xdist also the (suite, id) keys of everything still queued here."""
    session = item.session
    items = session.items
    interactor = _worker_interactor(item.config)
    if interactor is None:
        index = _index_of(session, item)
        return [(i, items[i]) for i in range(index, min(len(items), index + 64))], None
    with interactor.torun.lock() as queue:
        indices = [i for i in queue if isinstance(i, int)]
    if isinstance(interactor.nextitem_index, int):
        indices.insert(0, interactor.nextitem_index)
    order = [(_index_of(session, item), item)] + [(i, items[i]) for i in indices]
    keys = set()
    for _, other in order:
        suite, problem = _suite_of(getattr(other, "module", None)), _problem_of(other)
        if suite is not None and problem is not None:
            keys.add((suite.name, problem.node_id))
    return order, keys


def _index_of(session: pytest.Session, item: pytest.Item) -> int:
    positions = getattr(session, "_agenteval_positions", None)
    if positions is None or len(positions) != len(session.items):
        positions = {id(it): i for i, it in enumerate(session.items)}
        session._agenteval_positions = positions  # type: ignore[attr-defined]
    return positions.get(id(item), 0)


def _worker_interactor(config: pytest.Config) -> Any:
    if not _is_worker(config):
        return None
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ == "WorkerInteractor" and hasattr(plugin, "torun"):
            return plugin
    return None


def pytest_sessionfinish(session: pytest.Session) -> None:
    runtime = session.config.stash.get(RUNTIME, None)
    if runtime is None:
        return
    counts = runtime.backend_counts()
    runtime.close()
    if _is_worker(session.config):
        session.config.workeroutput["agenteval_backend"] = counts  # type: ignore[attr-defined]
    else:
        collector = session.config.pluginmanager.get_plugin("agenteval-results")
        if collector is not None:
            collector.add_backend_counts(counts)


class _XdistController:
    """Controller-side xdist hooks."""

    def __init__(self, choice: ModelChoice) -> None:
        self.choice = choice

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["agenteval_model_name"] = self.choice.model_name

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """Work stealing hands each worker a long queue up front, which it prefetches;
        plain `load` would feed it two items at a time."""
        if config.getoption("dist") != "load":
            return None
        from xdist.scheduler import WorkStealingScheduling

        return WorkStealingScheduling(config, log)
