"""Suites the controller can summarise by name, and the markers they use."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from pytest_agenteval.api.suite import Suite

BUILTIN_SUITES = {
    "aime25": "pytest_agenteval.tasks.aime25:Aime25",
    "bfcl": "pytest_agenteval.tasks.bfcl.suite:Bfcl",
    "gaia": "pytest_agenteval.tasks.gaia.suite:Gaia",
    "datagen": "pytest_agenteval.tasks.datagen.suite:Datagen",
}

# The numeric summary fields of the built-in suites a gate may name, so a typo or a field
# that is not a number fails at start-up. `<name>` stands for any one key (pass_at_k.<k>:
# pass_at_k.1 ... pass_at_k.N); a template ending in `.<path>` for any deeper path.
_COMMON = (
    "problems",
    "generations",
    "tokens.prompt",
    "tokens.completion",
    "requests.<counter>",
    "harness.<measure>",
    "backend.<counter>",  # the processes' counters: retries by cause, cache hits, gave_up_500...
    "errors.<counter>",  # errors.items
    "duration_s",
)
MATH_METRICS = _COMMON + (
    "average_at_n",
    "pass_at_n",
    "format_rate",
    "mean_code_calls",
    "mean_turns",
    "correct_generations",
    "passed_problems",
    "maj_at_n",
    "pass_at_k.<k>",
    "sandbox.<path>",  # counters and latency_ms.p95
)
BFCL_METRICS = _COMMON + (
    "items",
    "correct",
    "accuracy",
    "lenient_accuracy",
    "error_rate",
    "overall",
    "overall_official",
    "weighted_accuracy",
    "parameter_accuracy",
    "per_category.<category>.<measure>",
    "groups.<group>",
    "groups_official.<group>",
    "relevance.<measure>",
    "error_types.<type>",
)
GAIA_METRICS = _COMMON + (
    "items",
    "scored",
    "correct",
    "accuracy",
    "error_rate",
    "per_level.<level>.<measure>",
    "drop_rates.<levels>",
    "mean_steps_correct",
    "mean_annotator_steps_correct",
    "mean_annotator_steps",
    "tokens_total",
    "tokens_mean",
    "latency_mean_s",
    "latency_p50_s",
    "latency_p95_s",
)
DATAGEN_METRICS = _COMMON + (
    "reference_problems",
    "opponents_per_item",
    "judge.<path>",
    "winrate.<path>",
    "panel.<path>",
    "checks.<path>",
    "human.<path>",
    "load.<path>",
    "gate_presets.<path>",
)
KNOWN_METRICS: dict[str, tuple[str, ...]] = {
    "aime25": MATH_METRICS,
    "bfcl": BFCL_METRICS,
    "gaia": GAIA_METRICS,
    "datagen": DATAGEN_METRICS,
}


def _builtin_class(suite: Suite) -> tuple[str, type] | None:
    for cls in type(suite).__mro__:
        for name, target in BUILTIN_SUITES.items():
            module, _, attribute = target.partition(":")
            inside = cls.__module__ == module or cls.__module__.startswith(module + ".")
            if inside and cls.__qualname__ == attribute:
                return name, cls
    return None


def builtin_kind(suite: Suite) -> str | None:
    """The built-in suite a suite is or derives from (a subclass of Aime25 named `mymath`
    is aime25: it reads the same options), or None for a suite of its own."""
    found = _builtin_class(suite)
    return found[0] if found is not None else None


def numeric_metrics(suite: Suite) -> tuple[str, ...] | None:
    """The gateable fields of a suite's summary where known: a built-in's, or those of the
    built-in it derives from while it keeps that one's `summarize` (one of its own may add
    fields); None where unknown."""
    if suite.name in KNOWN_METRICS:
        return KNOWN_METRICS[suite.name]
    found = _builtin_class(suite)
    if found is None or type(suite).summarize is not found[1].summarize:
        return None
    return KNOWN_METRICS[found[0]]


def suite_of_file(path: Path) -> Suite | None:
    """The `agenteval_suite` of a collected test file, imported as the xdist controller
    imports it for its summary (the same object then serves the summary)."""
    suite = _from_file(path)
    if suite is not None:
        remember(suite)
    return suite


_instances: dict[str, Suite] = {}


class SuiteImportError(Exception):
    """A suite module that raised when the controller imported it to summarise its
    results; the message is one line naming the module, the exception and the fix."""


def forget_suites() -> None:
    """A new pytest session in this process (`pytest.main` called again, pytester's
    in-process runs) sees only its own suites, never the last session's objects."""
    _instances.clear()


def remember(suite: Suite) -> None:
    """Suites seen during collection in this process (covers user-defined suites
    when the controller is also the only worker)."""
    _instances.setdefault(suite.name, suite)


def suite_by_name(name: str, source: Path | None = None) -> Suite:
    """The suite object for a name: one seen during collection here, or (the xdist
    controller collects nothing) the `agenteval_suite` of the test file `source`, else
    the built-in of that name, else a generic one (math metrics). A suite file that
    raises on import is a SuiteImportError: its own summary would be lost."""
    if name not in _instances:
        # the file's own suite first: a subclass of a built-in keeps its name (aime25)
        suite = _from_file(source) if source is not None else None
        if suite is None or suite.name != name:
            target = BUILTIN_SUITES.get(name)
            if target is not None:
                module, _, attribute = target.partition(":")
                suite = getattr(importlib.import_module(module), attribute)()
            else:
                suite = Suite()
                suite.name = name
        _instances[name] = suite
    return _instances[name]


def _from_file(path: Path) -> Suite | None:
    """Import a suite module by path as pytest's workers did (the default import mode,
    prepend: the folder above its packages first on sys.path, the dotted module name),
    for its suite object. None when the file is not on this machine."""
    if not path.is_file():
        return None  # a remote worker's path: the built-in of the records' name, or generic
    root, name = _import_root(path)
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        module = _import_as_pytest_does(path, name)
    except BaseException as exc:  # pytest.skip at module level, sys.exit: BaseExceptions too
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise SuiteImportError(
            f"{path}: importing the suite module on the xdist controller, for its summary, raised "
            f"{type(exc).__name__}: {_first_line(exc)}; it must import there as in the workers"
        ) from exc
    suite = getattr(module, "agenteval_suite", None)
    return suite if isinstance(suite, Suite) else None


def _import_as_pytest_does(path: Path, name: str) -> Any:
    """The module under its dotted name (prepend mode); where that name is already another
    file's (two suites named test_eval.py under --import-mode=importlib), the file under a
    name of its own, as importlib mode loads it."""
    taken = sys.modules.get(name)
    if taken is None or _is_file(taken, path):
        module = importlib.import_module(name)
        if _is_file(module, path):
            return module
    unique = f"agenteval_suite_{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]}"
    if unique in sys.modules:
        return sys.modules[unique]
    spec = importlib.util.spec_from_file_location(unique, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[unique] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[unique]
        raise
    return module


def _is_file(module: Any, path: Path) -> bool:
    found = getattr(module, "__file__", None)
    return found is not None and Path(found).resolve() == path.resolve()


def _import_root(path: Path) -> tuple[Path, str]:
    """The folder pytest puts on sys.path for a test file, and the file's module name."""
    parts = [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    return folder, ".".join(parts)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else "(no message)"
