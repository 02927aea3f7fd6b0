"""The SDK samplers' `--model-path` schemes, apart from `backends/sdk.py` (which the start-up
path, choosing a backend, does not need to import)."""

from __future__ import annotations

__all__ = ["SCHEMES", "StartupError", "checkpoint_of", "sdk_scheme"]

SCHEMES = ("trio", "tinker")


class StartupError(ValueError):
    """One line for the user: what was refused and the fix."""


def sdk_scheme(model_path: str | None) -> str | None:
    """'trio' for `trio://...`, 'tinker' for `tinker://...`, else None."""
    for scheme in SCHEMES:
        if model_path is not None and model_path.startswith(f"{scheme}://"):
            return scheme
    return None


def checkpoint_of(model_path: str) -> str | None:
    """`trio://` alone means the base model itself; anything after it is a checkpoint URI."""
    scheme = sdk_scheme(model_path)
    return None if scheme is None or model_path == f"{scheme}://" else model_path
