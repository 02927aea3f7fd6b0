"""Suites the controller can summarise by name, and the markers they use."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

from pytest_agenteval.api.suite import Suite

BUILTIN_SUITES = {
    "aime25": "pytest_agenteval.tasks.aime25:Aime25",
    "bfcl": "pytest_agenteval.tasks.bfcl.suite:Bfcl",
    "gaia": "pytest_agenteval.tasks.gaia.suite:Gaia",
    "datagen": "pytest_agenteval.tasks.datagen.suite:Datagen",
}

# Top-level summary keys of the built-in suites, so a gate typo fails at start-up.
MATH_METRICS = (
    "problems",
    "generations",
    "average_at_n",
    "pass_at_n",
    "format_rate",
    "mean_code_calls",
    "mean_turns",
    "correct_generations",
    "passed_problems",
    "maj_at_n",
    "pass_at_k",
    "ci95",
    "errors",
    "tokens",
    "requests",
    "sandbox",
    "backend",
    "harness",
)
_COMMON = ("problems", "generations", "errors", "tokens", "requests", "backend", "harness")
BFCL_METRICS = _COMMON + (
    "accuracy",
    "lenient_accuracy",
    "per_category",
    "groups",
    "groups_official",
    "weighted_accuracy",
    "error_rate",
    "parameter_accuracy",
    "relevance",
    "error_types",
)
GAIA_METRICS = _COMMON + (
    "items",
    "scored",
    "correct",
    "accuracy",
    "error_rate",
    "per_level",
    "drop_rates",
    "mean_steps_correct",
    "mean_annotator_steps_correct",
    "mean_annotator_steps",
    "tokens_total",
    "tokens_mean",
    "latency_mean_s",
    "latency_p50_s",
    "latency_p95_s",
)
DATAGEN_METRICS = _COMMON + ("judge", "winrate", "panel", "checks", "human", "load", "gate_presets")
KNOWN_METRICS: dict[str, tuple[str, ...]] = {
    "aime25": MATH_METRICS,
    "bfcl": BFCL_METRICS,
    "gaia": GAIA_METRICS,
    "datagen": DATAGEN_METRICS,
}

_instances: dict[str, Suite] = {}


def remember(suite: Suite) -> None:
    """Suites seen during collection in this process (covers user-defined suites
    when the controller is also the only worker)."""
    _instances.setdefault(suite.name, suite)


def suite_by_name(name: str, source: Path | None = None) -> Suite:
    """The suite object for a name: one seen during collection here, or (the xdist
    controller collects nothing) the `agenteval_suite` of the test file `source`, else
    the built-in of that name, else a generic one (math metrics)."""
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
    """Import a suite module by path, as pytest's workers did, for its suite object."""
    spec = importlib.util.spec_from_file_location(f"_agenteval_suite_{abs(hash(str(path)))}", path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception:  # noqa: BLE001 - fall back to the generic summary
        return None
    suite = getattr(module, "agenteval_suite", None)
    return suite if isinstance(suite, Suite) else None
