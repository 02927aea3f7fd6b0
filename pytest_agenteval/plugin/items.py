"""Which items an evaluation runs: the modules that declare a suite, `--limit`, and the
queue of items this process will run next (what the engine prefetches)."""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.api.records import Problem
from pytest_agenteval.api.suite import Suite
from pytest_agenteval.config import options

SUITE_ATTRIBUTE = "agenteval_suite"
# Set on the call report of an item whose generations were scored and none solved it
# (`Evaluation.check`): the one failure a gate may forgive (docs/ci.md#exit-status).
UNSOLVED = "agenteval_unsolved"


def suite_of(module: Any) -> Suite | None:
    suite = getattr(module, SUITE_ATTRIBUTE, None)
    return suite if isinstance(suite, Suite) else None


def problem_of(item: pytest.Item) -> Problem | None:
    callspec = getattr(item, "callspec", None)
    problem = callspec.params.get("problem") if callspec is not None else None
    return problem if isinstance(problem, Problem) else None


def in_use(config: pytest.Config, settings: options.Settings) -> bool:
    """Is this run an evaluation? The plugin is installed for every pytest run in the
    environment; start-up checks (and their side effects) happen only when an agenteval
    option is set or a collected path holds a module that declares `agenteval_suite`."""
    return bool(settings.explicit) or any(True for _ in suite_files(config))


def suite_files(config: pytest.Config) -> Iterator[Path]:
    """The test files under the run's paths that declare `agenteval_suite`."""
    paths = [_arg_path(config, arg.split("::")[0]) for arg in config.args] or [config.rootpath]
    patterns = config.getini("python_files") or ["test_*.py"]
    for path in paths:
        files = [path] if path.is_file() else [f for pattern in patterns for f in _walk(path, pattern)]
        yield from (f for f in files if declares_suite(f))


def files_of_nodeid(config: pytest.Config, name: str) -> list[Path]:
    """The files on this machine that a node id's file part (`name`, before `::`) may
    name, as pytest made it: relative to the rootdir, or, for a file outside the rootdir
    (a `--pyargs` package), relative to the command-line path that holds it
    (`test_aime25.py`), or empty where that path is the file itself. The xdist controller
    collects nothing: it finds the suites of its workers' node ids here."""
    found = [config.rootpath / name] if name else []
    for arg in config.args:
        start = config.invocation_params.dir / _arg_path(config, arg.split("::")[0])
        found.append(start / name if name else start)
    return [path for path in dict.fromkeys(found) if path.is_file()]


def _arg_path(config: pytest.Config, arg: str) -> Path:
    """A command-line path, or under --pyargs a package or module name
    (`pytest_agenteval.suites.aime25`) as the folder or file pytest collects for it."""
    if getattr(config.option, "pyargs", False) and not Path(arg).exists():
        try:
            spec = importlib.util.find_spec(arg)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin not in (None, "namespace", "built-in", "frozen"):
            origin = Path(spec.origin)
            return origin.parent if spec.submodule_search_locations else origin
    return Path(arg)


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
        if isinstance(node, ast.ImportFrom) and any(
            (alias.asname or alias.name) == SUITE_ATTRIBUTE for alias in node.names
        ):
            return True  # a thin file over a shipped suite (the repository's suites/)
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == SUITE_ATTRIBUTE for t in targets):
            return True
    return False


def apply_limits(
    items: Sequence[pytest.Item], settings: options.Settings
) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """(kept, dropped): the first K selected problems of each suite (`--limit`) and of each
    category (`--limit-per-category`), in collection (dataset) order; in a sweep, of each
    model."""
    if not (settings.limit or settings.limit_per_category):
        return list(items), []

    def dataset_order(item: pytest.Item) -> tuple[int, int]:
        problem = problem_of(item)  # progressive BFCL runs items out of dataset order
        return (0, problem.index) if problem is not None else (1, 0)

    counts: dict[tuple[str, ...], int] = {}
    over: set[int] = set()
    for item in sorted(items, key=dataset_order):
        suite, problem = suite_of(getattr(item, "module", None)), problem_of(item)
        keys = [] if suite is None or problem is None else _limit_keys(settings, suite, problem)
        if any(counts.get(key, 0) >= limit for key, limit in keys):
            over.add(id(item))
            continue
        for key, _ in keys:
            counts[key] = counts.get(key, 0) + 1
    return [i for i in items if id(i) not in over], [i for i in items if id(i) in over]


def _limit_keys(
    settings: options.Settings, suite: Suite, problem: Problem
) -> list[tuple[tuple[str, ...], int]]:
    keys = []  # per model in a sweep (problem.model: "" otherwise)
    if settings.limit:
        keys.append(((suite.name, problem.model), settings.limit))
    if settings.limit_per_category:
        keys.append(((suite.name, problem.model, suite.category_of(problem)), settings.limit_per_category))
    return keys


def upcoming(item: pytest.Item) -> tuple[Iterable[tuple[int, pytest.Item]], set[tuple[str, str]] | None]:
    """Items this process will run from `item` on (lazily: the caller stops when the
    engine is full), with their collection order; under xdist also the (suite, id) keys of
    everything still queued here."""
    session = item.session
    items = session.items
    interactor = worker_interactor(item.config)
    if interactor is None:
        index = _index_of(session, item)
        return ((i, items[i]) for i in range(index, len(items))), None
    with interactor.torun.lock() as queue:
        indices = [i for i in queue if isinstance(i, int)]
    if isinstance(interactor.nextitem_index, int):
        indices.insert(0, interactor.nextitem_index)
    order = [(_index_of(session, item), item)] + [(i, items[i]) for i in indices]
    return order, {key for _, other in order if (key := item_key(other)) is not None}


def item_key(item: pytest.Item) -> tuple[str, str] | None:
    """(suite, node id): the engine-key prefix of an evaluation item's rollouts."""
    suite, problem = suite_of(getattr(item, "module", None)), problem_of(item)
    return None if suite is None or problem is None else (suite.name, problem.node_id)


def _index_of(session: pytest.Session, item: pytest.Item) -> int:
    positions = getattr(session, "_agenteval_positions", None)
    if positions is None or len(positions) != len(session.items):
        positions = {id(it): i for i, it in enumerate(session.items)}
        session._agenteval_positions = positions  # type: ignore[attr-defined]
    return positions.get(id(item), 0)


def worker_interactor(config: pytest.Config) -> Any:
    if not hasattr(config, "workerinput"):
        return None
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ == "WorkerInteractor" and hasattr(plugin, "torun"):
            return plugin
    return None
