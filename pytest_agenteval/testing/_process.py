"""Run the mock server as a separate process (benchmarks, cross-process tests)."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MODULE = "pytest_agenteval.testing.openai_server"
LISTENING = "LISTENING "
# The repository root, so the child finds the package even when it is not installed.
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def start_server_process(
    *args: str,
    timeout: float = 15.0,
    env: Mapping[str, str] | None = None,
    python: str = sys.executable,
) -> tuple[subprocess.Popen[str], str]:
    """Start ``python -m pytest_agenteval.testing.openai_server *args``; return it and its
    ``/v1`` URL once it printed ``LISTENING <url>``. stderr is inherited."""
    child_env = dict(os.environ if env is None else env)
    path = child_env.get("PYTHONPATH")
    child_env["PYTHONPATH"] = _PACKAGE_ROOT + (os.pathsep + path if path else "")
    proc = subprocess.Popen(
        [python, "-m", MODULE, "--port", "0", *args]
        if "--port" not in args
        else [python, "-m", MODULE, *args],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=child_env,
    )
    try:
        return proc, _wait_for_listening(proc, timeout)
    except BaseException:
        proc.kill()
        proc.wait()
        raise


def _wait_for_listening(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    buffer = b""
    fd = proc.stdout.fileno()  # raw reads: a buffered readline could hold a line select misses
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0:
            if not sel.select(left):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:  # EOF: the server died before binding
                raise RuntimeError(f"server exited ({proc.wait()}) before listening: {seen}")
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for raw in lines:
                line = raw.decode("utf-8", "replace")
                if line.startswith(LISTENING):
                    return line[len(LISTENING) :].strip()
                seen.append(line.rstrip())
    raise TimeoutError(f"server did not print {LISTENING.strip()!r} within {timeout} s: {seen}")


def stop_server_process(proc: subprocess.Popen[str], timeout: float = 15.0) -> dict[str, Any]:
    """SIGTERM the server and return the stats JSON it prints on the way out."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    if proc.returncode != 0:
        raise RuntimeError(f"server exited with {proc.returncode}: {out!r}")
    lines = [ln for ln in (out or "").splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"server printed no stats: {out!r}")
    return dict(json.loads(lines[-1]))


def _root(url: str) -> str:
    return url.rstrip("/").removesuffix("/v1")


def get_stats(url: str, timeout: float = 5.0) -> dict[str, Any]:
    """``GET /stats`` of a running server (``url`` with or without ``/v1``)."""
    with urllib.request.urlopen(_root(url) + "/stats", timeout=timeout) as resp:
        return dict(json.loads(resp.read()))


def reset_stats(url: str, timeout: float = 5.0) -> None:
    """``POST /stats/reset``: clear log, statistics and attempt counters."""
    req = urllib.request.Request(_root(url) + "/stats/reset", data=b"{}", method="POST")
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        resp.read()
