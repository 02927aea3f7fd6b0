"""The in-process transformers backend's tests. What they need beyond README command 1
comes with command 2; without it, each module skips, saying what to install."""

from __future__ import annotations

import importlib.util

import pytest

# module -> the install that brings it (torch first: the extra does not list it)
NEEDS = {
    "torch": "pip install torch==2.13.0",
    "transformers": "pip install -e '.[transformers]'",
    "peft": "pip install -e '.[transformers]'",
    "accelerate": "pip install -e '.[transformers]'",
    "safetensors": "pip install -e '.[transformers]'",
    "gguf": "pip install -e '.[transformers]'",
}


def missing_backend() -> str | None:
    """Why these tests cannot run here (None: they can)."""
    missing = [module for module in NEEDS if importlib.util.find_spec(module) is None]
    if not missing:
        return None
    installs = " && ".join(dict.fromkeys(NEEDS[module] for module in missing))
    return f"the transformers backend's tests need {', '.join(missing)}: {installs}"


def skip_without_backend() -> None:
    """At the top of a test module, before anything that imports the backend."""
    reason = missing_backend()
    if reason is not None:
        pytest.skip(reason, allow_module_level=True)
