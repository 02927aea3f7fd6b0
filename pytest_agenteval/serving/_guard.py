"""The leader of a launched server's process group: `python -m pytest_agenteval.serving._guard
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


def set_parent_death_signal(signum: int) -> bool:
    """Linux only; False where prctl is unavailable."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _stop_group(child: subprocess.Popen[Any], grace_s: float) -> None:
    """SIGTERM to everyone in the group but us, a grace period, then SIGKILL (us included)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        os.killpg(0, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + grace_s
    while child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(0, signal.SIGKILL)  # grandchildren too; ends this process


def main(argv: list[str]) -> int:
    if not argv:
        sys.stderr.write("usage: python -m pytest_agenteval.serving._guard CMD [ARGS...]\n")
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

    def on_signal(signum: int, frame: Any) -> None:
        _stop_group(child, grace_s)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, on_signal)
    code = child.wait()
    # The server is gone: its helpers go too, but this guard reports the server's exit code.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        os.killpg(0, signal.SIGTERM)
    except ProcessLookupError:
        pass
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
