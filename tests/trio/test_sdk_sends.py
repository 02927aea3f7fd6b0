"""The SDKs' own retries are counted at httpx's transport (models/backends/sdk.py
`count_http_sends`): an httpx imported again in the same process (a second `pytest.main`
after the first one's modules were dropped, as pytester does) is counted too."""

from __future__ import annotations

import asyncio
import http.server
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_agenteval.models.backends.sdk import count_http_sends, http_sends

ROUTE = "/counted-route"


class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}{ROUTE}"
    server.shutdown()
    server.server_close()


def is_httpx(name: str) -> bool:
    return name == "httpx" or name.startswith("httpx.")


def sends_of_one_request(httpx: Any, url: str) -> int:
    async def get() -> None:
        async with httpx.AsyncClient(trust_env=False) as client:
            (await client.get(url)).raise_for_status()

    before = http_sends(ROUTE)
    asyncio.run(get())
    return http_sends(ROUTE) - before


def test_an_httpx_imported_again_is_counted_again(url: str) -> None:
    import httpx as first

    count_http_sends(ROUTE)
    assert sends_of_one_request(first, url) == 1
    count_http_sends(ROUTE)  # once patched, never wrapped twice: still one
    assert sends_of_one_request(first, url) == 1
    saved = {name: module for name, module in sys.modules.items() if is_httpx(name)}
    try:
        for name in saved:
            del sys.modules[name]
        import httpx as again

        assert again is not first
        count_http_sends(ROUTE)
        assert sends_of_one_request(again, url) == 1
    finally:
        for name in [n for n in sys.modules if is_httpx(n)]:
            del sys.modules[name]
        sys.modules.update(saved)
