"""The plugin's assertion-rewritten bytecode, written once for the processes a module starts.

pytest rewrites the asserts of a pytest11 plugin's whole package (the ~100 modules of
pytest_agenteval that load with the plugin, and any imported later) in every process that
loads it: each xdist worker of an inner `-n 2` run, each subprocess pytest run. It keeps
the result beside the plain bytecode (`*.cpython-311-pytest-9.2.0.pyc`) only where
PYTHONDONTWRITEBYTECODE is unset; with it set (CI images set it) each of those processes
parsed and compiled those modules again, about 0.3 s of CPU of a ~1.2 s start.
tests/conftest.py compiles the plain bytecode once; this writes the rewritten one, from one
pytest process without the variable. Every later process reads it (pytest checks the
source's time and size, and rewrites a changed module itself), so the processes run the
same rewritten code as before.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import pytest_agenteval

PACKAGE = Path(pytest_agenteval.__file__).parent
TAG = f"{sys.implementation.cache_tag}-pytest-{pytest.__version__}.pyc"

# The plugin loads about 100 of the package's modules; a suite, the controller, a backend
# more, each process its own: every module is imported under pytest's hook (about 2 s of
# CPU once), so each of them is written. A module that fails to import is left out.
PRIME = """import importlib
import pkgutil

import pytest_agenteval

for module in pkgutil.walk_packages(pytest_agenteval.__path__, "pytest_agenteval."):
    try:
        importlib.import_module(module.name)
    except BaseException:
        pass
"""


def _written() -> bool:
    probe = PACKAGE / "plugin" / "__pycache__" / f"hooks.{TAG}"
    return probe.exists() and probe.stat().st_mtime >= (PACKAGE / "plugin" / "hooks.py").stat().st_mtime


def write_rewritten_bytecode() -> None:
    """Once, where it matters: PYTHONDONTWRITEBYTECODE set, the package's folder writable."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or not os.access(PACKAGE, os.W_OK) or _written():
        return
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as folder:  # its conftest imports every module once
        (Path(folder) / "conftest.py").write_text(PRIME, encoding="utf-8")
        (Path(folder) / "test_nothing.py").write_text("def test_nothing():\n    pass\n", encoding="utf-8")
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--co", "-q"]
        subprocess.run(command, cwd=folder, env=env, capture_output=True, timeout=120, check=False)
