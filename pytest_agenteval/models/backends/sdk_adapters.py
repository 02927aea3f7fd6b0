"""Which SDK adapter serves a `--model-path` scheme; each vendor's module is imported on
first use (apart from `sdk.py`, which the adapters build on)."""

from __future__ import annotations

from typing import Any

from pytest_agenteval.models.schemes import StartupError

ADAPTERS: dict[str, Any] = {}


def adapter_for(scheme: str) -> Any:
    """A new adapter of the SDK behind `scheme`; its module is imported on first use."""
    if scheme not in ADAPTERS:
        if scheme == "trio":
            from pytest_agenteval.models.backends.trio import TrioAdapter

            ADAPTERS[scheme] = TrioAdapter
        elif scheme == "tinker":
            from pytest_agenteval.models.backends.tinker import TinkerAdapter

            ADAPTERS[scheme] = TinkerAdapter
        else:
            raise StartupError(f"--model-path {scheme}://: no such backend; use trio:// or tinker://")
    return ADAPTERS[scheme]()
