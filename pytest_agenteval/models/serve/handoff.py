"""How workers learn a server that a sweep starts later: the controller writes one file per
model into the run's private serve folder (0700, each file 0600, written atomically), and
the model's sampler waits for it (async polling, `LaterServer`) before its first request.
The file holds the server's URL and per-launch key, or the reason it did not start."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_agenteval.api.sampler import SamplerError

POLL_S = 0.1  # a stat of the served file: cheap; a later wave's items see their server 0.1 s late at most


def served_file(folder: Path, label: str) -> Path:
    return Path(folder) / f"served-{label}.json"


def write_served(folder: Path, label: str, data: Mapping[str, Any]) -> Path:
    """Write a model's server (or its failure) for the workers: owner-only, never half-written."""
    target = served_file(folder, label)
    fd, tmp = tempfile.mkstemp(prefix=".served-", dir=folder)  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(dict(data), handle)
        os.chmod(tmp, 0o600)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def read_served(path: Path) -> dict[str, Any] | None:
    """The written data, or None while the server is not up yet."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def is_ready(path: Path) -> bool:
    """The model's server is up (or failed: its items may run, and error at once)."""
    return Path(path).exists()


class LaterServer:
    """Where a later wave's model finds its server (an `OpenAISampler`'s `awaiting`): it
    waits for the served file and returns what it holds (endpoints, key, the record with
    the logs). The wait has no bound of its own: the controller writes the file when the
    server is up or did not start (that start is what --serve-timeout bounds), and the
    earlier waves may rightly take hours. A server that did not start is a SamplerError
    naming why."""

    def __init__(self, path: Path, label: str = "") -> None:
        self.path = Path(path)
        self.label = label

    async def __call__(self) -> Mapping[str, Any]:
        while True:
            data = read_served(self.path)
            if data is not None:
                if data.get("error"):
                    raise SamplerError(str(data["error"]))
                return data
            if not self.path.parent.is_dir():  # the controller ended the run (its folder is gone)
                raise SamplerError(
                    f"the server of model {self.label} never started: the run ended before its wave"
                )
            await asyncio.sleep(POLL_S)
