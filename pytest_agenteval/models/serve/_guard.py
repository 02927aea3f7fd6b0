"""The leader of a launched server's process group: `python -m pytest_agenteval.models.serve._guard
CMD...`. PR_SET_PDEATHSIG reaches only the process that set it, so a SIGKILLed controller
would orphan the server's own children (vLLM's engine and TP workers). This guard asks
for SIGTERM when its parent dies and then takes the whole group down with it."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from typing import Any

PR_SET_PDEATHSIG = 1
PARENT_ENV = "AGENTEVAL_GUARD_PARENT"  # the controller's pid, to close the fork/prctl race
GRACE_ENV = "AGENTEVAL_GUARD_GRACE"
KEEP_ENV = "AGENTEVAL_GUARD_KEEP"  # --serve-keep: outlive the controller on purpose
POLL_S = 0.05


def _signal_group(signum: int) -> None:
    try:
        os.killpg(0, signum)
    except ProcessLookupError:
        pass


def set_parent_death_signal(signum: int) -> bool:
    """Linux only; False where prctl is unavailable."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def main(argv: list[str]) -> int:
    if not argv:
        sys.stderr.write("usage: python -m pytest_agenteval.models.serve._guard CMD [ARGS...]\n")
        return 2
    grace_s = float(os.environ.pop(GRACE_ENV, "5"))
    parent = os.environ.pop(PARENT_ENV, "")
    if not os.environ.pop(KEEP_ENV, ""):
        set_parent_death_signal(signal.SIGTERM)
        if parent and os.getppid() != int(parent):  # the controller died before prctl
            return 1
    try:
        child = subprocess.Popen(argv)  # same process group: ours
    except OSError as exc:
        sys.stderr.write(f"cannot start {argv[0]}: {exc}\n")
        return 127

    stop_at: list[float] = []  # set by a signal: the moment the grace period ends

    def on_signal(signum: int, frame: Any) -> None:
        # Only note it and pass SIGTERM on: the waiting happens below, because
        # Popen.poll() inside a handler interrupting Popen.wait() cannot take its lock.
        if not stop_at:
            stop_at.append(time.monotonic() + grace_s)
            for ignored in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(ignored, signal.SIG_IGN)
            _signal_group(signal.SIGTERM)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, on_signal)
    while (code := child.poll()) is None:
        if stop_at and time.monotonic() > stop_at[0]:
            _signal_group(signal.SIGKILL)  # the grace is over: everyone, this guard included
        time.sleep(POLL_S)
    if stop_at:
        _signal_group(signal.SIGKILL)  # the server is gone; its helpers go now, and so do we
    # The server exited on its own: its helpers get SIGTERM, the guard reports its exit code.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _signal_group(signal.SIGTERM)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
