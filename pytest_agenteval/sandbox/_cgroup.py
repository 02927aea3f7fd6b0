"""A cgroup per zygote: how the evaluator finds every process model code started.

Why: the subreaper sweep only sees descendants while the zygote lives, and the
environment marker is gone as soon as a daemon re-executes itself with an empty
environment. Cgroup membership is inherited by every fork, survives setsid, exec
and reparenting to init, and is invisible to a process's environment, so it finds
a double-forked, env-cleared daemon even after the zygote was killed. Needs write
access to a cgroup hierarchy (root, or a delegated subtree); prefers cgroup v2
(`cgroup.kill`), else the v1 `pids` hierarchy. Stdlib only.
"""

from __future__ import annotations

import os
import signal
import time

from pytest_agenteval.sandbox import _procs

_V1_CONTROLLER = "pids"  # any v1 hierarchy tracks membership; pids is the lightest


def _own_cgroups() -> dict[str, str]:
    """{"": v2 path, "pids": v1 path, ...} of this process, from /proc/self/cgroup."""
    out: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup") as handle:
            for line in handle:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for name in controllers.split(",") if controllers else [""]:
                    out[name] = path
    except (OSError, ValueError):
        pass
    return out


def _hierarchies() -> list[str]:
    """Directories of this process's own cgroups we could nest under, v2 first."""
    own = _own_cgroups()
    found: list[tuple[int, str]] = []
    try:
        with open("/proc/self/mountinfo") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        root, mountpoint, fstype, options = fields[3], fields[4], tail[0], tail[2].split(",")
        if fstype == "cgroup2" and "" in own:
            path, rank = own[""], 0
        elif fstype == "cgroup" and _V1_CONTROLLER in options and _V1_CONTROLLER in own:
            path, rank = own[_V1_CONTROLLER], 1
        else:
            continue
        if root != "/" and not (path + "/").startswith(root.rstrip("/") + "/"):
            continue  # our cgroup is outside what this mount shows
        relative = path[len(root) :] if root != "/" else path
        found.append((rank, os.path.join(mountpoint, relative.lstrip("/"))))
    return [path for _, path in sorted(found)]


class Cgroup:
    """One cgroup directory holding a zygote and everything it ever started."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.procs_file = os.path.join(path, "cgroup.procs")

    @classmethod
    def create(cls, name: str) -> Cgroup | None:
        """A fresh cgroup named `name`, or None where no hierarchy is writable."""
        for parent in _hierarchies():
            path = os.path.join(parent, name)
            try:
                os.mkdir(path, 0o755)
            except OSError:
                continue
            if os.access(os.path.join(path, "cgroup.procs"), os.W_OK):
                return cls(path)
            _rmdir(path)
        return None

    def members(self) -> list[int]:
        """Live processes in the cgroup (zombies excluded)."""
        try:
            with open(self.procs_file) as handle:
                pids = [int(x) for x in handle.read().split()]
        except (OSError, ValueError):
            return []
        return [p for p in pids if _procs.alive(p)]

    def kill(self, timeout: float = 2.0) -> list[int]:
        """SIGKILL every member until none is left; returns the survivors."""
        kill_file = os.path.join(self.path, "cgroup.kill")
        deadline = time.monotonic() + timeout
        while True:
            members = self.members()
            if not members or time.monotonic() > deadline:
                return members
            if not _write(kill_file, "1"):  # v1 (or v2 before 5.14): stop, then kill
                for pid in members:
                    _procs.kill_quietly(pid, signal.SIGSTOP)
                for pid in members:
                    _procs.kill_quietly(pid, signal.SIGKILL)
            time.sleep(0.005)

    def remove(self) -> None:
        """Delete the (empty) directory; killed processes may take a moment to be reaped."""
        for _ in range(200):
            if _rmdir(self.path) or not os.path.isdir(self.path):
                return
            time.sleep(0.005)


def available() -> bool:
    """Whether a per-zygote cgroup can be made here (probed by making one)."""
    group = Cgroup.create(f"agenteval-probe-{os.getpid()}")
    if group is None:
        return False
    group.remove()
    return True


def _write(path: str, text: str) -> bool:
    try:
        with open(path, "w") as handle:
            handle.write(text)
        return True
    except OSError:
        return False


def _rmdir(path: str) -> bool:
    try:
        os.rmdir(path)
        return True
    except OSError:
        return False
