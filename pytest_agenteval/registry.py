"""Suites the controller can summarise by name, and the markers they use."""

from __future__ import annotations

import importlib

from .suite import Suite

BUILTIN_SUITES = {
    "aime25": "pytest_agenteval.aime25:Aime25",
    "bfcl": "pytest_agenteval.bfcl.suite:Bfcl",
    "gaia": "pytest_agenteval.gaia.suite:Gaia",
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
    "complete",
    "errors",
    "tokens",
    "requests",
    "sandbox",
    "backend",
    "harness",
)
_COMMON = ("problems", "generations", "complete", "errors", "tokens", "requests", "backend", "harness")
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
KNOWN_METRICS: dict[str, tuple[str, ...]] = {
    "aime25": MATH_METRICS,
    "bfcl": BFCL_METRICS,
    "gaia": GAIA_METRICS,
}

_instances: dict[str, Suite] = {}


def remember(suite: Suite) -> None:
    """Suites seen during collection in this process (covers user-defined suites
    when the controller is also the only worker)."""
    _instances.setdefault(suite.name, suite)


def suite_by_name(name: str) -> Suite:
    """The suite object for a name; a generic one (math metrics) for unknown names."""
    if name not in _instances:
        target = BUILTIN_SUITES.get(name)
        if target is None:
            generic = Suite()
            generic.name = name
            _instances[name] = generic
        else:
            module, _, attribute = target.partition(":")
            _instances[name] = getattr(importlib.import_module(module), attribute)()
    return _instances[name]
