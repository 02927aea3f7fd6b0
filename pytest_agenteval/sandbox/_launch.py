"""Starting, talking to and killing one zygote process (evaluator side)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from pytest_agenteval.sandbox import _procs
from pytest_agenteval.sandbox._cgroup import Cgroup

ZYGOTE_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_zygote.py")
TOKEN_VAR = "AGENTEVAL_SANDBOX_TOKEN"
SCRATCH_TMPFS_BYTES = 256 << 20
_THREAD_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "BLIS_NUM_THREADS",
)
_ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
)


class ZygoteStartError(RuntimeError):
    """The zygote did not come up (its log tail is in the message)."""


@dataclass(frozen=True)
class Plan:
    """Which layers a zygote applies. uid_drop: None, or keep CAP_DAC_READ_SEARCH."""

    uid_drop: bool | None = None
    landlock: bool = False
    seccomp: bool = False
    bwrap: str | None = None  # path of the bwrap binary
    preload: tuple[str, ...] = ()
    limits: dict = field(default_factory=dict)
    timeout_s: float = 30.0
    read_bytes: int = 16384


def minimal_env(scratch_root: str, token: str | None) -> dict[str, str]:
    """The whole environment of the zygote: nothing from the evaluator's os.environ.
    The token marker goes in only where no cgroup tracks the zygote's processes (the
    code can read its own environment, so the marker is the fallback, not the rule)."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": scratch_root,
        "TMPDIR": scratch_root,
        "MPLCONFIGDIR": scratch_root,
    }
    if token is not None:
        env[TOKEN_VAR] = token
    env.update({name: "1" for name in _THREAD_VARS})  # BLAS/OpenMP pools stay single-threaded
    return env


def _ro_roots(preload: tuple[str, ...]) -> list[str]:
    """Directories bwrap must show read-only: the interpreter, its prefixes, the zygote."""
    roots = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
        os.path.dirname(ZYGOTE_PY),
    }
    for name in preload:
        mod = sys.modules.get(name)
        file = getattr(mod, "__file__", None)
        if file:
            roots.add(os.path.dirname(os.path.dirname(file)))
    out: list[str] = []
    for root in sorted(r for r in roots if not r.startswith("/usr/")):
        if not any(root.startswith(kept + os.sep) for kept in out):  # parents cover children
            out.append(root)
    return out


def bwrap_argv(bwrap: str, scratch_root: str, env: dict[str, str], preload: tuple[str, ...]) -> list[str]:
    """One bubblewrap around the whole zygote: no network, own pids, read-only view."""
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--clearenv"]
    if os.geteuid() == 0:
        argv += ["--cap-drop", "ALL"]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    # /tmp first: binds below (a checkout under /tmp, say) then mount on top of it.
    argv += ["--proc", "/proc", "--dev", "/dev", "--size", str(64 << 20), "--tmpfs", "/tmp"]
    argv += ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    for root in _ro_roots(preload):
        argv += ["--ro-bind", root, root]
    for path in _ETC_FILES:
        argv += ["--ro-bind-try", path, path]
    argv += [
        # Scratch is a private, size-capped tmpfs: RLIMIT_FSIZE caps files, not their number.
        "--size",
        str(SCRATCH_TMPFS_BYTES),
        "--tmpfs",
        scratch_root,
        "--remount-ro",
        "/",
        "--chdir",
        scratch_root,
    ]
    return argv + ["--"]


def zygote_config(plan: Plan, scratch_root: str) -> dict:
    """The JSON the zygote receives as argv[1]."""
    return {
        "scratch_root": scratch_root,
        "preload": list(plan.preload),
        "limits": plan.limits,
        "timeout_s": plan.timeout_s,
        "read_bytes": plan.read_bytes,
        "uid_drop": None if plan.uid_drop is None else {"keep_read_search": plan.uid_drop},
        "landlock": plan.landlock,
        "seccomp": plan.seccomp,
        "pdeathsig": plan.bwrap is None,
        "parent_pid": os.getpid(),
    }


class ZygoteProcess:
    """One running zygote: JSON lines in, JSON lines out."""

    def __init__(self, plan: Plan, scratch_root: str, token: str) -> None:
        self.plan = plan
        self.scratch_root = scratch_root
        self.token = token
        self.proc: subprocess.Popen | None = None
        self.hello: dict = {}
        self._buf = b""
        self.log_path = os.path.join(scratch_root, "zygote.log")
        self.cgroup: Cgroup | None = None

    def start(self, hello_timeout: float = 120.0) -> dict:
        self.cgroup = Cgroup.create(f"agenteval-sandbox-{self.token}")
        env = minimal_env(self.scratch_root, None if self.cgroup else self.token)
        argv = [
            sys.executable,
            "-I",
            "-B",
            ZYGOTE_PY,
            json.dumps(zygote_config(self.plan, self.scratch_root)),
        ]
        if self.plan.bwrap:
            argv = bwrap_argv(self.plan.bwrap, self.scratch_root, env, self.plan.preload) + argv
        if self.cgroup is not None:
            # Join the cgroup before the first fork (bwrap forks at once), then become argv.
            argv = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', self.cgroup.procs_file, *argv]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                cwd=self.scratch_root,
                close_fds=True,
                start_new_session=True,
            )
        os.set_blocking(self.proc.stdout.fileno(), False)
        deadline = time.monotonic() + hello_timeout
        while time.monotonic() < deadline:
            msgs = self.read_messages(timeout=deadline - time.monotonic())
            if msgs is None:
                break
            for msg in msgs:
                if msg.get("type") == "hello":
                    self.hello = msg
                    return msg
        self.kill()
        raise ZygoteStartError(f"the sandbox zygote did not start: {self.log_tail()}")

    def log_tail(self, n: int = 600) -> str:
        try:
            with open(self.log_path, "rb") as f:
                data = f.read()[-n:].decode(errors="replace").strip()
        except OSError:
            data = ""
        return data or "(no output)"

    def fileno(self) -> int:
        return self.proc.stdout.fileno()

    def send(self, msg: dict) -> None:
        data = (json.dumps(msg) + "\n").encode()
        fd = self.proc.stdin.fileno()
        while data:
            data = data[os.write(fd, data) :]

    def read_messages(self, timeout: float | None = 0.0) -> list[dict] | None:
        """Messages available now (after waiting up to timeout); None once the pipe is closed."""
        ready, _, _ = select.select([self.fileno()], [], [], timeout)
        if not ready:
            return []
        try:
            data = os.read(self.fileno(), 1 << 20)
        except BlockingIOError:
            return []
        if not data:
            return None
        self._buf += data
        *lines, self._buf = self._buf.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]

    def run_once(self, code: str, timeout: float) -> dict:
        """Blocking single call (used by the probe, which has no supervisor thread)."""
        self.send({"type": "run", "id": 1, "code": code})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msgs = self.read_messages(timeout=deadline - time.monotonic())
            if msgs is None:
                raise ZygoteStartError(f"the sandbox zygote died: {self.log_tail()}")
            for msg in msgs:
                if msg.get("type") == "result":
                    return msg
        raise ZygoteStartError("the sandbox zygote did not answer")

    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def stop(self, grace: float = 2.0) -> list[int]:
        """Ask the zygote to exit (EOF on its stdin), then kill whatever is left."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(grace)
            except (OSError, subprocess.TimeoutExpired):
                pass
        return self.kill()

    def kill(self) -> list[int]:
        """SIGKILL the zygote, its session and every process it started; the survivors.

        Three nets, strongest first: the cgroup (every descendant, env-cleared daemons
        that outlived the zygote included), the zygote's descendants taken before it
        dies (it is their subreaper), and the environment marker where no cgroup exists."""
        strays: list[int] = []
        if self.proc is not None:
            if self.proc.poll() is None:  # not reaped: its pid is still ours
                strays = _procs.descendants(self.proc.pid)
                _procs.kill_trees([self.proc.pid])
            _procs.killpg_quietly(self.proc.pid, signal.SIGKILL)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
            for pipe in (self.proc.stdin, self.proc.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass
        survivors: list[int] = []
        if self.cgroup is not None:
            survivors = self.cgroup.kill()
            self.cgroup.remove()
        else:
            strays += _procs.pids_with_env(f"{TOKEN_VAR}={self.token}\0".encode())
        if strays:
            _procs.kill_trees(strays)
        return sorted(set(survivors) | set(_procs.wait_gone(strays, 2.0)))

    def members(self) -> list[int]:
        """Every live process of this zygote (itself and its infrastructure included)."""
        if self.cgroup is not None:
            return self.cgroup.members()
        found = set(_procs.pids_with_env(f"{TOKEN_VAR}={self.token}\0".encode()))
        if self.proc is not None and _procs.alive(self.proc.pid):
            found.update([self.proc.pid, *_procs.descendants(self.proc.pid)])
        return sorted(found)
