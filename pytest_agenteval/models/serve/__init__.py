"""Launched inference servers: resolving `--model-path`, building server command lines,
starting them once on the controller, and checking that an adapter changes the model.

The names below load when asked for: a worker imports `models/choice.py` only, and the
resolver (hashing, the hub) stays off its start-up path."""

from __future__ import annotations

from typing import Any

__all__ = ["ResolveError", "ResolvedModel", "adapter_is_live", "resolve_model_path"]

_HOMES = {
    "adapter_is_live": "probe",
    "ResolveError": "resolve",
    "ResolvedModel": "resolve",
    "resolve_model_path": "resolve",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
