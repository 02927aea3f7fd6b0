"""In-process front ends: a threaded server and an ``async with`` server."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from typing import Any

from pytest_agenteval.testing._app import ServerCore
from pytest_agenteval.testing._config import ServerConfig
from pytest_agenteval.testing._stats import attempts_by_key, faults_before_success


class _ServerHandle:
    """Accessors shared by the threaded and the async server."""

    config: ServerConfig
    _core: ServerCore

    def __init__(self, config: ServerConfig | None = None, **overrides: Any) -> None:
        self.config = replace(config, **overrides) if config else ServerConfig(**overrides)
        self._core = ServerCore(self.config)

    @property
    def url(self) -> str:
        """Base URL for OpenAI clients, ending in ``/v1``."""
        if self._core.port is None:
            raise RuntimeError("server is not running")
        return self._core.url

    @property
    def base_url(self) -> str:
        """Server root (``/stats`` lives here)."""
        return self.url.removesuffix("/v1")

    @property
    def port(self) -> int:
        if self._core.port is None:
            raise RuntimeError("server is not running")
        return self._core.port

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Copy of the request log (one entry per generation request, completion order)."""
        return self._core.log.entries()

    @property
    def side_requests(self) -> dict[str, int]:
        """Requests that are not generations, by route (e.g. {"tokenize": 12})."""
        return dict(self._core.side_requests)

    @property
    def billed(self) -> dict[str, int]:
        """A billing server's books (`ServerConfig(billing=True)`): prompt and completion
        tokens of every generation, whether or not the client got it."""
        if self._core.billing is None:
            raise RuntimeError("the server does not bill: ServerConfig(billing=True)")
        return self._core.billing.totals()

    @property
    def in_flight(self) -> int:
        """Generation requests being served right now."""
        return self._core.tracker.current

    def stats(self) -> dict[str, Any]:
        return self._core.stats()

    def set_model(self, system_fingerprint: str | None = None, **card: Any) -> None:
        """Serve other weights behind the same URL and name from the next request on:
        `card` replaces the extra fields of the /v1/models entry (e.g. `root=`,
        `max_model_len=`), `system_fingerprint` what every reply carries. Without `card`, a
        server reporting its own identity (the default) keeps it."""
        if card or self.config.model_card is not None:
            self.config.model_card = dict(card)
        self.config.system_fingerprint = system_fingerprint

    def reset(self) -> None:
        """Clear log, in-flight statistics and per-key attempt counters."""
        self._core.reset()

    def attempts_by_key(self) -> dict[str, list[str]]:
        return attempts_by_key(self.requests)

    def faults_before_success(self) -> dict[str, int]:
        return faults_before_success(self.requests)


class OpenAITestServer(_ServerHandle):
    """Runs the server on its own event loop in a daemon thread."""

    def __init__(self, config: ServerConfig | None = None, **overrides: Any) -> None:
        super().__init__(config, **overrides)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    def start(self, timeout: float = 10.0) -> OpenAITestServer:
        if self._thread is not None:
            raise RuntimeError("server already started")
        ready = threading.Event()
        errors: list[BaseException] = []
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._main(ready, errors)),
            name=f"openai-test-server-{id(self):x}",
            daemon=True,
        )
        self._thread.start()
        if not ready.wait(timeout):
            raise RuntimeError(f"test server did not start within {timeout} s")
        if errors:
            self._thread.join()
            self._thread = None
            raise errors[0]
        return self

    async def _main(self, ready: threading.Event, errors: list[BaseException]) -> None:
        try:
            await self._core.start()
        except BaseException as exc:  # surfaced to the starting thread
            errors.append(exc)
            ready.set()
            await self._core.stop()
            return
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        ready.set()
        try:
            await self._stop.wait()
        finally:
            await self._core.stop()

    def close(self, timeout: float = 10.0) -> None:
        """Stop serving; in-flight requests get ``config.shutdown_timeout`` to finish."""
        thread, loop, stop = self._thread, self._loop, self._stop
        if thread is None:
            return
        if loop is not None and stop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stop.set)
        thread.join(timeout)
        if thread.is_alive():
            raise RuntimeError("test server thread did not stop")
        self._thread = self._loop = self._stop = None

    def __enter__(self) -> OpenAITestServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncOpenAITestServer(_ServerHandle):
    """Runs the server on the caller's event loop (``async with``)."""

    async def start(self) -> AsyncOpenAITestServer:
        await self._core.start()
        return self

    async def close(self) -> None:
        await self._core.stop()

    async def __aenter__(self) -> AsyncOpenAITestServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
