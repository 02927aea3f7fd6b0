"""An unreachable hub fails the run in seconds with one line, not after the datasets
library's retries: a hub that refuses connections, and one that accepts and never answers."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from pytest_agenteval.datasets import hub as hub_module
from pytest_agenteval.datasets.hub import PROBE_TIMEOUT_S


@pytest.fixture
def silent_hub() -> Iterator[str]:
    """A socket that completes the TCP handshake (the kernel's backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def closed_hub() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # nothing listens there any more: connection refused


@pytest.mark.parametrize("hub", ["closed_hub", "silent_hub"])
def test_an_unreachable_hub_is_one_line_within_seconds(
    aime_suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest, hub: str
) -> None:
    endpoint = request.getfixturevalue(hub)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_HOME", str(aime_suite.path / "hf-home"))
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    timeout = PROBE_TIMEOUT_S
    if hub == "silent_hub":  # the probe's own timeout, a tenth of it: the same wait, 4.5 s less idle
        timeout = PROBE_TIMEOUT_S / 10
        monkeypatch.setattr(hub_module, "PROBE_TIMEOUT_S", timeout)
    started = time.monotonic()
    # in this process: the probe reads HF_ENDPOINT when it asks, and stops the run before
    # the datasets library (which reads its environment at import) is called
    result = aime_suite.runpytest_inprocess(
        "-p", "no:cacheprovider", "--model-path=replay:none.jsonl", "--co"
    )
    elapsed = time.monotonic() - started
    why = "Connection refused" if hub == "closed_hub" else f"no answer in {timeout:g} s"
    expected = (
        f"agenteval: cannot load hub dataset yentinglin/aime_2025: the hub is unreachable ({endpoint}: "
        f"[Errno 111] {why}); for offline runs pass --dataset-path FILE, or set HF_HUB_OFFLINE=1 to use a "
        "cached copy"
        if hub == "closed_hub"
        else f"agenteval: cannot load hub dataset yentinglin/aime_2025: the hub is unreachable ({endpoint}: "
        f"{why}); for offline runs pass --dataset-path FILE, or set HF_HUB_OFFLINE=1 to use a cached copy"
    )
    assert expected in result.stdout.lines, result.stdout.str()
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert elapsed < timeout + 10  # collection included
