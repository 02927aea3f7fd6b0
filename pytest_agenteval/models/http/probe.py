"""Blocking requests for the start-up probes (`/v1/models`, `/tokenize`, a launched
server's readiness, the adapter's logprobs, an SDK service's health), sent by the same
aiohttp client as every generation: one HTTP stack, so a probe sees the proxy, the
certificates and the one-line, key-free errors that the run's requests will."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
from collections.abc import Mapping
from typing import Any

from pytest_agenteval.models.http.client import HttpClient, HttpError, IdleTimeout, InvalidRequest


class Unreachable(OSError):
    """Nothing answered: the connection failed, the reply broke off, or the time ran out.
    Its text is one line with no header value in it."""


def _reason(exc: Exception) -> str:
    """Why nothing answered, in the operating system's words where it said them
    (`[Errno 111] Connection refused`), else the client's one line."""
    number = getattr(getattr(exc.__cause__, "os_error", None), "errno", None)
    return f"[Errno {number}] {os.strerror(number)}" if number else str(exc)


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

    async def ask() -> tuple[int, Any]:
        client = HttpClient()
        try:
            method = "GET" if data is None else "POST"
            async with await client.send(method, url, headers, body=data, timeout=timeout_s) as reply:
                raw = await reply.read()
                try:
                    return reply.status, json.loads(raw or b"null")
                except ValueError:
                    return reply.status, None
        except (HttpError, IdleTimeout, InvalidRequest) as exc:
            raise Unreachable(_reason(exc)) from None
        except asyncio.TimeoutError:
            raise Unreachable(f"no answer within {timeout_s:g} s") from None
        finally:
            await client.close()

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # the usual case: a start-up hook, no loop in this thread
        return asyncio.run(ask())
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # called from inside a loop
        return pool.submit(asyncio.run, ask()).result()
