"""Which containment layers work on this machine: probed once per process and level.

Static facts (Landlock ABI, seccomp arch table, bwrap binary, euid) give a
plan; then a throwaway zygote without preloads applies the plan to one call
that tries a socket, a fork and a read outside its scratch directory, so only
layers seen working are reported.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import uuid

from pytest_agenteval.sandbox import _cgroup, _landlock, _privdrop, _seccomp
from pytest_agenteval.sandbox._launch import ZYGOTE_PY, Plan, ZygoteProcess, ZygoteStartError
from pytest_agenteval.sandbox._report import build_report
from pytest_agenteval.sandbox._types import LEVELS

_CHECK = r"""
import json, os, socket
r = {"uid": os.getuid()}
def attempt(name, fn):
    try:
        fn()
        r[name] = "allowed"
    except OSError as e:
        r[name] = e.errno
attempt("socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close())
def fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
attempt("fork", fork)
attempt("read_outside", lambda: open(PROBE_FILE).read(1))
print(json.dumps(r))
"""

_lock = threading.Lock()
_cache: dict[str, tuple[dict, dict]] = {}


def _bwrap_version(path: str) -> str | None:
    try:
        out = subprocess.run(
            [path, "--version"],
            capture_output=True,
            text=True,
            timeout=10,
            env={"PATH": "/usr/bin:/bin"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def static_facts() -> dict:
    """What can be known without running anything contained."""
    # Everything the child imports from must be readable by uid 65534, or it keeps the
    # capability to read: the interpreter, stdlib, site-packages (a venv under a 0700
    # home is common) and this package.
    paths = sysconfig.get_paths()
    needed = [
        os.path.realpath(sys.executable),
        paths["stdlib"],
        paths["purelib"],
        paths["platlib"],
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    ]
    readable = _privdrop.world_readable([p for p in needed if os.path.exists(p)])
    bwrap = shutil.which("bwrap")  # on PATH (os.defpath when PATH is unset)
    return {
        "euid": os.geteuid(),
        "landlock_abi": _landlock.abi_version(),
        "seccomp_arch": _seccomp.supported(),
        "bwrap": bwrap,
        "bwrap_version": _bwrap_version(bwrap) if bwrap else None,
        "interpreter_world_readable": readable,
        "cgroup": _cgroup.available(),
    }


def _plan(level: str, facts: dict) -> tuple[dict, dict]:
    """Layers to try for a level, and why the others are off."""
    off: dict[str, str] = {}
    want = {"uid_drop": None, "landlock": False, "seccomp": False, "bwrap": None}
    want["cgroup"] = facts["cgroup"]  # tracks processes at every level, basic included
    if facts["euid"] == 0:
        want["uid_drop"] = not facts["interpreter_world_readable"]
    if level == "basic":
        return want, off
    if facts["landlock_abi"] > 0:
        want["landlock"] = True
    else:
        off["landlock"] = "the kernel has no Landlock (or it is disabled)"
    if facts["seccomp_arch"]:
        want["seccomp"] = True
    else:
        off["seccomp"] = f"no syscall table for {os.uname().machine}"
    if level in ("auto", "bwrap"):
        if facts["bwrap"]:
            want["bwrap"] = facts["bwrap"]
            want["uid_drop"] = None  # inside bwrap the uid is unmapped; the namespace isolates
        else:
            off["bwrap"] = "bwrap is not on PATH"
    return want, off


def _try(want: dict, scratch: str) -> tuple[dict | None, str]:
    plan = Plan(
        uid_drop=want["uid_drop"],
        landlock=want["landlock"],
        seccomp=want["seccomp"],
        bwrap=want["bwrap"],
        limits=_probe_limits(),
        timeout_s=10.0,
    )
    zygote = ZygoteProcess(plan, scratch, uuid.uuid4().hex)
    try:
        zygote.start(hello_timeout=60.0)
        # The zygote's own source: visible and world-readable everywhere, not on the allow-list.
        msg = zygote.run_once(f"PROBE_FILE = {ZYGOTE_PY!r}\n" + _CHECK, timeout=30.0)
        own_pid_ns = zygote.hello.get("pid") != zygote.proc.pid  # bwrap's pid namespace
    except ZygoteStartError as exc:
        return None, str(exc)
    finally:
        zygote.stop()
    if msg.get("setup_failed") or msg.get("exit_code") != 0:
        return None, (msg.get("stderr") or "probe call failed").strip()[-300:]
    seen = json.loads(msg["stdout"].strip().splitlines()[-1])
    seen["own_pid_ns"] = own_pid_ns
    return seen, ""


def _probe_limits() -> dict:
    return {"cpu": 11, "as": 1 << 30, "fsize": 1 << 20, "nofile": 64, "nproc": 64}


def _disable(want: dict, layer: str, facts: dict) -> None:
    want[layer] = None if layer in ("uid_drop", "bwrap") else False
    if layer == "bwrap" and facts["euid"] == 0:  # outside bwrap, root children drop to nobody
        want["uid_drop"] = not facts["interpreter_world_readable"]


def _verify(level: str, facts: dict) -> tuple[dict, dict]:
    """Try the plan; drop layers that fail or show no effect, until all that remain work."""
    want, off = _plan(level, facts)
    scratch = tempfile.mkdtemp(prefix="agenteval-probe-")
    os.chmod(scratch, 0o711)
    try:
        for _ in range(6):
            seen, err = _try(want, scratch)
            if seen is None:
                layer = _failed_layer(want, err)
                if layer is None:
                    raise RuntimeError(f"the sandbox cannot start even at the basic level: {err}")
                off[layer] = err.splitlines()[-1] if err else "failed to start"
                _disable(want, layer, facts)
                continue
            idle = _ineffective(want, seen)
            if not idle:
                return want, off
            for layer in idle:
                off[layer] = "applied but showed no effect in the probe"
                _disable(want, layer, facts)
        raise RuntimeError("the sandbox probe did not converge")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _failed_layer(want: dict, err: str) -> str | None:
    for layer in ("landlock", "seccomp", "uid_drop"):
        if want[layer] not in (None, False) and f"{layer}:" in err:
            return layer
    if want["bwrap"]:
        return "bwrap"
    for layer in ("seccomp", "landlock", "uid_drop"):
        if want[layer] not in (None, False):
            return layer
    return None


def _ineffective(want: dict, seen: dict) -> list[str]:
    """Planned layers whose effect the probe call did not observe."""
    checks = {
        "seccomp": seen.get("socket") != "allowed" and seen.get("fork") != "allowed",
        "landlock": seen.get("read_outside") != "allowed",
        "uid_drop": seen.get("uid") == _privdrop.NOBODY,
        "bwrap": bool(seen.get("own_pid_ns")),
    }
    return [name for name, ok in checks.items() if want[name] not in (None, False) and not ok]


def resolve(level: str) -> tuple[dict, dict]:
    """(report, layers to apply) for a level; probed once per process and level."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    with _lock:
        if level not in _cache:
            facts = static_facts()
            got, off = _verify(level, facts)
            _cache[level] = (build_report(level, got, off, facts), got)
        report, got = _cache[level]
        return copy.deepcopy(report), dict(got)


def probe_containment(level: str = "auto") -> dict:
    """The containment a Sandbox at `level` gets on this machine (cached per process).

    {"level": "strong"|"basic", "layers": [...], "weak_guarantees": [...],
     "warning": str | None, "requested": level, "details": {...}}
    """
    return resolve(level)[0]
