"""Process-tree helpers over /proc (stdlib only; used by the zygote and the evaluator)."""

from __future__ import annotations

import os
import signal
import time


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def ppid_of(pid: int) -> int:
    """Parent pid from /proc/<pid>/stat (0 when the process is gone)."""
    data = _read(f"/proc/{pid}/stat")
    # comm may contain spaces and parentheses: split after the last ')'
    tail = data.rpartition(b")")[2].split()
    return int(tail[1]) if len(tail) > 1 else 0


def cmdline(pid: int) -> bytes:
    """Raw /proc/<pid>/cmdline (NUL-separated; empty when gone)."""
    return _read(f"/proc/{pid}/cmdline")


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def children(pid: int) -> list[int]:
    """Direct children of pid (every thread's children file, or a /proc scan)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out: list[int] = []
    for tid in tids:
        path = f"/proc/{pid}/task/{tid}/children"
        if not os.path.exists(path):  # kernel without CONFIG_PROC_CHILDREN
            return [p for p in _all_pids() if ppid_of(p) == pid]
        out.extend(int(x) for x in _read(path).split())
    return out


def descendants(pid: int) -> list[int]:
    """Every process below pid, parents before their children."""
    out: list[int] = []
    stack = children(pid)
    while stack:
        p = stack.pop()
        out.append(p)
        stack.extend(children(p))
    return out


def kill_quietly(pid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def killpg_quietly(pgid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(pgid, sig)
    except OSError:
        pass


def kill_trees(roots: list[int]) -> int:
    """SIGKILL roots and everything below them; returns how many pids were signalled.

    Stopping first keeps a fork bomb from outrunning the walk.
    """
    victims: list[int] = []
    for root in roots:
        victims.append(root)
        victims.extend(descendants(root))
    for pid in victims:
        kill_quietly(pid, signal.SIGSTOP)
    for pid in victims:
        kill_quietly(pid, signal.SIGKILL)
    return len(victims)


def pids_with_env(marker: bytes) -> list[int]:
    """Processes whose initial environment contains marker (readable ones only)."""
    me = os.getpid()
    return [p for p in _all_pids() if p != me and marker in _read(f"/proc/{p}/environ")]


def alive(pid: int) -> bool:
    """True while pid exists and is not a zombie."""
    data = _read(f"/proc/{pid}/stat")
    state = data.rpartition(b")")[2].split()[:1]
    return bool(state) and state[0] not in (b"Z", b"X")


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Poll until none of pids is alive; returns the survivors."""
    deadline = time.monotonic() + timeout
    left = [p for p in pids if alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.01)
        left = [p for p in left if alive(p)]
    return left
