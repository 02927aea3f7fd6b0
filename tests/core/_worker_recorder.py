"""The conftest the remote-worker tests (test_remote_workers.py, test_ssh_workers.py) give
their suite: at the end of its session each xdist worker writes what it saw to
OUT/<workerid>.json, for the test to check where it ran and what it was told."""

from __future__ import annotations

from pathlib import Path

_RECORDER = """
import json, os
from pathlib import Path
import pytest_agenteval
from pytest_agenteval.plugin.hooks import RUNTIME


def pytest_sessionfinish(session):
    config = session.config
    if not hasattr(config, "workerinput"):
        return
    runtime = config.stash[RUNTIME]
    Path(OUT, config.workerinput["workerid"] + ".json").write_text(json.dumps({
        "cwd": os.getcwd(),
        "package": pytest_agenteval.__file__,
        "dataset_path": runtime.settings.dataset_path,
        "cache_dir": str(runtime.cache_dir),
        "concurrency": runtime.concurrency,
        "sandbox_workers": runtime.sandbox_workers,
    }))
"""


def worker_recorder(out: Path) -> str:
    """A conftest's text: each worker records its cwd, the pytest_agenteval it imported, its
    dataset_path, cache_dir, concurrency and sandbox_workers in `out`/<workerid>.json."""
    return f"OUT = {str(out)!r}\n" + _RECORDER
