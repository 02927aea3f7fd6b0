"""How workers learn a server that a sweep starts later: the controller writes one file per
model into the run's private serve folder (0700, each file 0600, written atomically), and
the model's sampler waits for it (async polling, at most --serve-timeout). The file holds
the server's URL and per-launch key, or the reason it did not start."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_agenteval.api.sampler import (
    Completion,
    Message,
    ModelIdentity,
    SamplerError,
    SamplingParams,
    approx_token_count,
)

POLL_S = 0.2
PENDING_KEY = "pending"  # in a placeholder choice's `served`: the file its sampler waits for


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


class WaitingSampler:
    """A sampler for a model whose server starts later in the sweep: each call waits for
    the served file, then goes to the real sampler `build` makes from it. A server that
    did not start (or not within `timeout_s`) turns every call into a SamplerError naming why."""

    native_tools = True

    def __init__(
        self,
        path: Path,
        identity: ModelIdentity,
        build: Callable[[Mapping[str, Any]], Any],
        timeout_s: float,
        label: str = "",
    ) -> None:
        self.path = Path(path)
        self.identity = identity  # known before the server: the cache key must not wait
        self._build = build
        self.timeout_s = timeout_s
        self.label = label
        self.records_served = True
        self._inner: Any = None
        self._error: str | None = None
        self._lock: asyncio.Lock | None = None

    async def _sampler(self) -> Any:
        if self._inner is not None:
            return self._inner
        if self._error is None:
            if self._lock is None:
                self._lock = asyncio.Lock()
            async with self._lock:
                if self._inner is None and self._error is None:
                    await self._wait()
        if self._error is not None:
            raise SamplerError(self._error)
        return self._inner

    async def _wait(self) -> None:
        started = time.monotonic()
        while True:
            data = read_served(self.path)
            if data is not None:
                if data.get("error"):
                    self._error = str(data["error"])
                else:
                    self._inner = self._build(data)
                return
            if time.monotonic() - started > self.timeout_s:
                self._error = (
                    f"the server of model {self.label} was not up after {self.timeout_s:g} s of waiting "
                    "(--serve-timeout); the models before it in the sweep took longer"
                )
                return
            await asyncio.sleep(POLL_S)

    async def complete(
        self,
        messages: Sequence[Message],
        params: SamplingParams,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | None = None,
    ) -> Completion:
        inner = await self._sampler()
        return await inner.complete(messages, params, tools, tool_choice)

    def count_tokens(self, text: str) -> int:
        return self._inner.count_tokens(text) if self._inner is not None else approx_token_count(text)

    def stats(self) -> dict[str, Any]:
        return self._inner.stats() if self._inner is not None else {}

    async def aclose(self) -> None:
        if self._inner is not None:
            await self._inner.aclose()

    def __getattr__(self, name: str) -> Any:  # the rest of the real sampler, once it exists
        inner = self.__dict__.get("_inner")
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)
