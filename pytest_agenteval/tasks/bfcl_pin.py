"""The bfcl-eval release our BFCL checkers were verified against, and the line a run prints
when another one is installed. Apart from `tasks/bfcl/` (whose package imports the whole
checker): the start-up check of every evaluation run reads it."""

from __future__ import annotations

import importlib.metadata

VERIFIED_BFCL_EVAL = "2026.3.23"  # the bfcl-eval whose checker and data our verdicts were checked against


def bfcl_eval_version() -> str | None:
    """The installed bfcl-eval's version, or None where it is not installed."""
    try:
        return importlib.metadata.version("bfcl-eval")
    except importlib.metadata.PackageNotFoundError:
        return None


def version_warning(installed: str | None) -> str | None:
    """One line when another bfcl-eval than the verified one is installed."""
    if installed is None or installed == VERIFIED_BFCL_EVAL:
        return None
    return (
        f"bfcl-eval {installed} is installed: BFCL verdicts were verified against bfcl-eval "
        f"{VERIFIED_BFCL_EVAL} only (pip install --no-deps bfcl-eval=={VERIFIED_BFCL_EVAL})"
    )
