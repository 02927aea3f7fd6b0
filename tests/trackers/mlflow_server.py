"""A throwaway `mlflow server` (SQLite backend, artifacts in a folder, a loopback port), for
tests/trackers/test_mlflow.py and benchmarks/mlflow_screenshot.py."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

# MLflow 3's server also starts a job runner (a process importing MLflow that starts seven Huey
# consumers, each another) for server-side jobs (GenAI scorers, trace rollups); the tracker
# logs through the tracking REST API only, which is served the same without it
SERVER_ENV = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


def start(folder: Path, timeout_s: float = 180) -> tuple[subprocess.Popen, str]:
    """Start it and wait for /health; RuntimeError with the end of its log if it does not come up."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    mlflow = shutil.which("mlflow", path=os.path.dirname(sys.executable)) or "mlflow"
    server = subprocess.Popen(
        [mlflow, "server", "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}",
         "--default-artifact-root", str(folder / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1"],
        stdout=(folder / "server.log").open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, **SERVER_ENV},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as reply:
                if reply.status == 200:
                    return server, url
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            stop(server)
            raise RuntimeError(f"mlflow server did not start: {(folder / 'server.log').read_text()[-2000:]}")
        time.sleep(0.1)  # a refused connection costs nothing: ask again soon


def stop(server: subprocess.Popen) -> None:
    """The server and its uvicorn worker: a throwaway store."""
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGKILL)
    server.wait(timeout=30)
