"""The start-up probes on the aiohttp client (models/http/probe.py): what a user reads when
an endpoint cannot be reached (the kernel's, the resolver's or TLS's own words, as
urllib gave them), redirects followed, and the caller's event loop left as it was, whether
none, an idle one or a running one."""

from __future__ import annotations

import asyncio
import http.server
import json
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_agenteval.models import probe_endpoint, probe_models


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path == "/v1/models":
            self.send_response(307)
            self.send_header("Location", "/moved/v1/models")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps({"data": [{"id": "m"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _serve(context: ssl.SSLContext | None = None) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    scheme = "https" if context is not None else "http"
    try:
        yield f"{scheme}://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def redirecting() -> Iterator[str]:
    yield from _serve()


@pytest.fixture
def self_signed(tmp_path: Path) -> Iterator[str]:
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a self-signed certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    yield from _serve(context)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_refused_connection_says_so_as_the_kernel_does() -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    with pytest.raises(ValueError) as error:
        probe_endpoint(url, None, timeout_s=5)
    assert str(error.value) == (
        f"cannot reach --endpoint {url} ([Errno 111] Connection refused); start the server or fix the URL"
    )


def test_an_unknown_host_says_what_the_resolver_said() -> None:
    with pytest.raises(ValueError) as error:
        probe_endpoint("http://no-such-host.invalid/v1", None, timeout_s=5)
    message = str(error.value)
    assert message.startswith("cannot reach --endpoint http://no-such-host.invalid/v1 ([Errno -"), message
    assert "Unknown error" not in message


def test_a_certificate_that_does_not_verify_says_so(self_signed: str) -> None:
    with pytest.raises(ValueError) as error:
        probe_endpoint(self_signed, None, timeout_s=5)
    assert "CERTIFICATE_VERIFY_FAILED" in str(error.value), str(error.value)


def test_a_redirect_is_followed(redirecting: str) -> None:
    assert probe_endpoint(redirecting, None, timeout_s=5) == ["m"]


def test_the_callers_event_loop_stays_current(redirecting: str) -> None:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        assert probe_endpoint(redirecting, None, timeout_s=5) == ["m"]
        assert asyncio.get_event_loop() is loop
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def test_a_probe_from_inside_a_running_loop_answers(redirecting: str) -> None:
    async def inside() -> list[dict[str, object]]:
        return probe_models(redirecting, None, timeout_s=5)

    assert asyncio.run(inside()) == [{"id": "m"}]
