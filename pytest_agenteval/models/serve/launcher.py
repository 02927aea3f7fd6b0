"""Start a server once, know it is ours, and never leave it behind.

Loopback only, a free port, a random per-launch key in the child's environment (never on
argv or in a file), the child's output in a log file whose tail is in every failure line,
a finite start-up timeout with progress lines, and process-group teardown: SIGTERM, a
grace period, SIGKILL, then a check that the group is empty. The group leader is
`_guard`, which dies with the controller (PR_SET_PDEATHSIG) and takes the server with it."""

from __future__ import annotations

import atexit
import collections
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agenteval.models.http.probe import Unreachable, request_json
from pytest_agenteval.models.serve import _guard
from pytest_agenteval.models.serve.commands import HOST, ServerSpec, printable

TAIL_LINES = 10
# Log lines after which a server never becomes ready, although its process lives on
# (inspect_ai's vllm.py keeps a similar list): fail at once instead of at --serve-timeout.
FATAL_MARKERS = (
    "CUDA out of memory",
    "OutOfMemoryError",
    "less than desired GPU memory utilization",
    "No CUDA GPUs are available",
    "Address already in use",
)
PROGRESS_EVERY_S = 30.0
POLL_S = 0.1  # a refused connection and a look at the log tail: cheap; a start is seen 0.1 s late at most


class LaunchError(RuntimeError):
    """The server could not be started or is not ours; the message is one line."""


@dataclass
class LaunchedServer:
    spec: ServerSpec
    log_path: Path
    process: subprocess.Popen[Any] | None  # None: a kept server from an earlier run
    pid: int
    key: str | None = field(repr=False, default=None)
    ready_s: float = 0.0
    reused: bool = False
    version: str | None = None

    @property
    def url(self) -> str:
        return self.spec.url

    def describe(self) -> dict[str, Any]:
        """For the summary: everything but the key."""
        return {
            "backend": self.spec.backend,
            "url": self.url,
            "served_name": self.spec.served_name,
            "command": printable(self.spec),
            "env": dict(self.spec.env),
            "version": self.version,
            "log": str(self.log_path),
            "pid": self.pid,
            "ready_s": round(self.ready_s, 2),
            "reused": self.reused,
            "adapters": dict(self.spec.adapters),
            "sampling_defaults_sent": dict(self.spec.sampling_defaults),
        }


ACTIVE: list[LaunchedServer] = []  # every server this process started and has not stopped
_lock = threading.Lock()


def new_key() -> str:
    """A random per-launch API key (replicas of one launch share it)."""
    return secrets.token_urlsafe(24)


def free_port() -> tuple[socket.socket, int]:
    """A loopback port held open (SO_REUSEADDR, not listening) until the child binds it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, 0))
    return sock, sock.getsockname()[1]


def log_tail(path: Path, lines: int = TAIL_LINES) -> str:
    """The last lines of a log, joined with ' | ' so a failure stays one line."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            tail = collections.deque((line.rstrip() for line in handle if line.strip()), maxlen=lines)
    except OSError:
        return "(no log)"
    return " | ".join(tail) or "(empty log)"


def list_models(url: str, key: str | None, timeout_s: float = 5.0) -> tuple[int, list[str]]:
    """(HTTP status, model ids) of `GET url/models`; status 0 when nothing answers."""
    try:
        status, payload = request_json(f"{url}/models", api_key=key, timeout_s=timeout_s)
    except Unreachable:
        return 0, []
    data = payload.get("data", []) if status == 200 and isinstance(payload, dict) else []
    return status, [str(m.get("id")) for m in data if isinstance(m, dict)] if isinstance(data, list) else []


def _failure(spec: ServerSpec, log_path: Path, what: str) -> LaunchError:
    return LaunchError(
        f"{spec.backend} server {what}; log {log_path}: {log_tail(log_path)}; command: {printable(spec)}"
    )


def launch(
    spec: ServerSpec,
    log_path: Path,
    *,
    timeout_s: float,
    keep: bool = False,
    held: socket.socket | None = None,
    say: Callable[[str], None] = lambda line: None,
    progress_every_s: float = PROGRESS_EVERY_S,
    version: str | None = None,
    key: str | None = None,
) -> LaunchedServer:
    """Start `spec`, wait until it lists our served name, and return it. On any failure
    the group is stopped and LaunchError carries the exit code, log path and tail.
    Call from the main thread: the parent-death signal fires when the forking thread ends."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    if keep or spec.key_env is None:
        key = None  # key-less: a kept server outlives the run that knew the key
    elif key is None:
        key = new_key()
    env = {**os.environ, **spec.env, _guard.PARENT_ENV: str(os.getpid()), _guard.GRACE_ENV: str(spec.grace_s)}
    if spec.key_env is not None:  # ours, or none at all: never a stray key from the parent
        env.pop(spec.key_env, None)
        if key is not None:
            env[spec.key_env] = key
    if keep:
        env[_guard.KEEP_ENV] = "1"
    with open(log_path, "ab") as log:
        log.write(f"# agenteval launch: {printable(spec)}\n".encode())
        log.flush()
        process = subprocess.Popen(
            [sys.executable, "-m", "pytest_agenteval.models.serve._guard", *spec.argv],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: teardown reaches every descendant
        )
    server = LaunchedServer(spec, log_path, process, process.pid, key, version=version)
    with _lock:
        ACTIVE.append(server)
    try:
        server.ready_s = _wait_ready(server, timeout_s, say, progress_every_s, held)
    except BaseException:
        stop(server)
        raise
    finally:
        if held is not None:
            held.close()
    if keep:  # --serve-keep: it outlives this run on purpose
        with _lock:
            ACTIVE.remove(server)
    return server


def _wait_ready(
    server: LaunchedServer,
    timeout_s: float,
    say: Callable[[str], None],
    progress_every_s: float,
    held: socket.socket | None,
) -> float:
    spec, started = server.spec, time.monotonic()
    next_progress = started + progress_every_s
    while True:
        assert server.process is not None
        code = server.process.poll()
        if code is not None:
            raise _failure(spec, server.log_path, f"exited with code {code} before it was ready")
        fatal = _fatal_line(server.log_path)
        if fatal is not None:
            raise _failure(spec, server.log_path, f"reported a fatal error before it was ready ({fatal})")
        status, models = list_models(spec.url, server.key, timeout_s=2.0)
        if status == 200 and spec.served_name in models:
            return time.monotonic() - started
        if status != 0 and status != 503:  # something answers, and it is not our server
            raise _failure(
                spec,
                server.log_path,
                f"on {spec.url} is not ours: it answers HTTP {status} and lists "
                f"{models or 'no models'}, not {spec.served_name} (another process holds the port?)",
            )
        now = time.monotonic()
        if now - started > timeout_s:
            raise _failure(spec, server.log_path, f"was not ready after {timeout_s:g} s (--serve-timeout)")
        if now >= next_progress:
            say(
                f"agenteval: waiting for the {spec.backend} server on {spec.url} "
                f"({now - started:.0f} s of {timeout_s:g} s); last log line: {log_tail(server.log_path, 1)}"
            )
            next_progress = now + progress_every_s
        time.sleep(POLL_S)


def _fatal_line(log: Path, window: int = 16384) -> str | None:
    """The first known fatal marker in the end of the log, if any."""
    try:
        with open(log, "rb") as handle:
            handle.seek(max(0, log.stat().st_size - window))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    return next((marker for marker in FATAL_MARKERS if marker in text), None)


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group. Zombies are dead: they hold no
    memory or GPU, and where pid 1 does not reap (some containers) they stay forever."""
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="utf-8", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def group_empty(pgid: int) -> bool:
    if os.path.isdir("/proc"):
        return not group_members(pgid)
    try:  # no /proc: ask the kernel (zombies count as members there)
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def stop(server: LaunchedServer, grace_s: float | None = None) -> str | None:
    """SIGTERM the group, wait, SIGKILL it, check it is empty. None, or what went wrong."""
    with _lock:
        if server in ACTIVE:
            ACTIVE.remove(server)
    grace = server.spec.grace_s if grace_s is None else grace_s
    pgid = server.pid  # the guard leads its own session, so its pid is the group id
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not _group_done(server, pgid):
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if server.process is not None:
        try:
            server.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return f"server group {pgid} did not exit after SIGKILL"
    deadline = time.monotonic() + 5
    while not group_empty(pgid):
        if time.monotonic() > deadline:
            return f"processes of server group {pgid} are still running after SIGKILL"
        time.sleep(0.05)
    return None


def _group_done(server: LaunchedServer, pgid: int) -> bool:
    if server.process is not None and server.process.poll() is None:
        return False
    return group_empty(pgid)


def stop_all() -> list[str]:
    """Stop every server this process launched (unconfigure, atexit, signals)."""
    with _lock:
        servers = list(ACTIVE)
    return [p for p in (stop(s) for s in servers) if p]


atexit.register(stop_all)
