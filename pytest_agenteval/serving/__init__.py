"""Launched inference servers: resolving `--model-path`, building server command lines,
starting them once on the controller, and checking that an adapter changes the model."""

from .probe import adapter_is_live
from .resolve import ResolvedModel, ResolveError, resolve_model_path

__all__ = ["ResolveError", "ResolvedModel", "adapter_is_live", "resolve_model_path"]
