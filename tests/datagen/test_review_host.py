"""The review page answers only under a loopback Host: a DNS-rebinding page (a foreign
name resolved to 127.0.0.1) must not read the items and the page token with a plain GET.
Against the real `python -m pytest_agenteval review` server over a real socket."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ITEM = {"problem_id": "gen-1", "problem": "What is 2+2?", "answer": "4", "solution": "4.", "topic": "arith"}


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    data = tmp_path_factory.mktemp("review") / "generated.jsonl"
    data.write_text(json.dumps(ITEM) + "\n", encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_agenteval", "review", str(data), "--port", "0", "--annotator", "ann"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    match = re.search(r"REVIEW http://127\.0\.0\.1:(\d+)/", line)
    assert match, f"review server did not start: {line!r}"
    yield int(match.group(1))
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=10)


def get(port: int, path: str, host: str | None) -> tuple[int, bytes]:
    """GET over a real socket with exactly this Host header (none when `host` is None)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.putrequest("GET", path, skip_host=True)
        if host is not None:
            connection.putheader("Host", host)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@pytest.mark.parametrize("path", ["/", "/api/items"])
@pytest.mark.parametrize(
    "host",
    [
        "evil.example:{port}",  # the rebinding page's own name
        "127.0.0.1.evil.example:{port}",
        "localhost.evil.example:{port}",
        "127.0.0.1:{other}",  # a loopback name, but not this server's port
        "127.0.0.1",  # no port
        "",
    ],
)
def test_a_foreign_host_gets_421_and_no_body(port: int, path: str, host: str) -> None:
    assert get(port, path, host.format(port=port, other=port + 1)) == (421, b"")


def test_a_request_without_host_is_refused_by_aiohttp_itself(port: int) -> None:
    assert get(port, "/api/items", None) == (400, b"Missing 'Host' header in request.")


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}", "LocalHost:{port}"])
def test_a_loopback_host_with_the_bound_port_is_served(port: int, host: str) -> None:
    status, body = get(port, "/api/items", host.format(port=port))
    snapshot = json.loads(body)
    assert (status, [item["id"] for item in snapshot["items"]]) == (200, ["gen-1"])


@pytest.mark.parametrize(
    ("port", "extra"),
    [(8765, set()), (80, {"127.0.0.1", "localhost", "[::1]"})],  # a browser leaves out port 80
)
def test_the_hosts_served_are_the_loopback_names_with_the_bound_port(
    tmp_path: Path, port: int, extra: set[str]
) -> None:
    from pytest_agenteval.report.review import ReviewState

    data = tmp_path / "generated.jsonl"
    data.write_text(json.dumps(ITEM) + "\n", encoding="utf-8")
    state = ReviewState(data, tmp_path / "verifications.json", "ann")
    state.bind(port)
    assert state.hosts == {f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"} | extra
