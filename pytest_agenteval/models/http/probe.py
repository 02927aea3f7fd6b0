"""Blocking requests for the start-up probes (`/v1/models`, `/tokenize`, a launched
server's readiness, the adapter's logprobs, an SDK service's health), sent by the same
aiohttp client as every generation: one HTTP stack, so a probe sees the proxy, the
certificates and the one-line, key-free errors that the run's requests will.

A probe follows redirects (a few; as a browser or urllib would), which generation
requests never do, and runs on an event loop of its own that it never makes the thread's
current one: a caller's loop, running or not, is left as it was."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import socket
import ssl
from collections.abc import Mapping
from typing import Any
from urllib.parse import urljoin

from pytest_agenteval.models.http.client import HttpClient, HttpError, IdleTimeout, InvalidRequest

REDIRECTS = (301, 302, 303, 307, 308)
MAX_REDIRECTS = 5


class Unreachable(OSError):
    """Nothing answered: the connection failed, the reply broke off, or the time ran out.
    Its text is one line with no header value in it."""


def _reason(exc: Exception) -> str:
    """Why nothing answered, in the words of what failed: the resolver's (`[Errno -2] Name
    or service not known`), TLS's (`[SSL: CERTIFICATE_VERIFY_FAILED] ...`), the kernel's
    (`[Errno 111] Connection refused`), else the client's own line."""
    cause = getattr(exc.__cause__, "os_error", None)
    if isinstance(cause, (socket.gaierror, ssl.SSLError)):
        return " ".join(str(cause).split())
    number = getattr(cause, "errno", None)
    if isinstance(number, int) and number > 0:
        return f"[Errno {number}] {os.strerror(number)}"
    return str(exc)


async def _ask(url: str, headers: dict[str, str], data: bytes | None, timeout_s: float) -> tuple[int, Any]:
    client = HttpClient()
    try:
        for _ in range(MAX_REDIRECTS + 1):
            method = "GET" if data is None else "POST"
            async with await client.send(method, url, headers, body=data, timeout=timeout_s) as reply:
                location = reply.headers.get("Location")
                if reply.status in REDIRECTS and location:
                    url = urljoin(url, location)
                    data = None if reply.status == 303 else data
                    continue
                raw = await reply.read()
                try:
                    return reply.status, json.loads(raw or b"null")
                except ValueError:
                    return reply.status, None
        raise Unreachable(f"more than {MAX_REDIRECTS} redirects")
    except (HttpError, IdleTimeout, InvalidRequest) as exc:
        raise Unreachable(_reason(exc)) from None
    except asyncio.TimeoutError:
        raise Unreachable(f"timed out after {timeout_s:g} s") from None
    finally:
        await client.close()


def _run(coroutine: Any) -> Any:
    """Run on a loop of its own, never set as the thread's current loop."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coroutine)
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def request_json(
    url: str,
    *,
    api_key: str | None = None,
    body: Mapping[str, Any] | None = None,
    timeout_s: float = 10.0,
) -> tuple[int, Any]:
    """(HTTP status, the reply's JSON, or None where it is not JSON) of a GET, or of a POST
    of `body`. Raises Unreachable when no HTTP answer came within `timeout_s`."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    if body is not None:
        headers["Content-Type"] = "application/json"
    data = json.dumps(body).encode() if body is not None else None
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # the usual case: a start-up hook, no loop running in this thread
        return _run(_ask(url, headers, data, timeout_s))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # called from inside a running loop
        return pool.submit(_run, _ask(url, headers, data, timeout_s)).result()
