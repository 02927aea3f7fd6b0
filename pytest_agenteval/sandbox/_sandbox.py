"""The evaluator side: a Sandbox owns one zygote and a supervisor thread.

All process work (starting, restarting, reading, killing the zygote) happens
in one long-lived supervisor thread: bubblewrap's --die-with-parent and the
zygote's parent-death signal fire when the *thread* that spawned them exits,
so spawning from a short-lived event-loop thread would kill the sandbox.
Callers on any thread or event loop hand work over through a queue and wait
on a concurrent.futures.Future.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import concurrent.futures
import math
import os
import select
import shutil
import tempfile
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, field

from pytest_agenteval.sandbox import _linux, _procs
from pytest_agenteval.sandbox._launch import Plan, ZygoteProcess, ZygoteStartError
from pytest_agenteval.sandbox._output import build_result, error_result
from pytest_agenteval.sandbox._probe import resolve
from pytest_agenteval.sandbox._types import STATUSES, ExecutionResult, SandboxConfig

_GRACE_S = 10.0  # past timeout + grace the zygote itself is presumed hung
_live: weakref.WeakSet = weakref.WeakSet()


@dataclass
class _Job:
    id: int
    code: str
    future: concurrent.futures.Future
    auto_print: bool = True
    submitted: float = field(default_factory=time.perf_counter)
    dispatched: float | None = None


class Sandbox:
    """Runs model-written Python in a contained, preloaded zygote (see docs/sandbox.md)."""

    def __init__(self, config: SandboxConfig = SandboxConfig()) -> None:  # noqa: B008
        self._config = config
        self._lock = threading.Lock()
        self._pending: collections.deque[_Job] = collections.deque()
        self._inflight: dict[int, _Job] = {}
        self._cancels: list[int] = []
        self._next_id = 0
        self._closed = False
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._zygote: ZygoteProcess | None = None
        self._base: str | None = None
        self._counts = dict.fromkeys(STATUSES, 0)
        self._latencies: list[float] = []
        self._restarts = 0
        self._restart_reasons: list[str] = []
        _live.add(self)

    # --- public API ----------------------------------------------------------
    @property
    def containment(self) -> dict:
        """{"level", "layers", "weak_guarantees", "warning", ...} for this sandbox's level."""
        return resolve(self._config.level)[0]

    async def run(self, code: str, auto_print: bool = True) -> ExecutionResult:
        """Execute code; at most config.workers executions run at once. With `auto_print`
        the repr of a trailing expression is printed, notebook-style."""
        future = self._submit(code, auto_print)
        return await asyncio.wrap_future(future)

    def run_sync(self, code: str, auto_print: bool = True) -> ExecutionResult:
        """Blocking variant of run() for tests, scripts and benchmarks."""
        return self._submit(code, auto_print).result()

    def stats(self) -> dict:
        with self._lock:
            counts = dict(self._counts)
            lat = sorted(self._latencies)
            restarts = self._restarts
        calls = sum(counts.values())

        def rate(n: int) -> float:
            return n / calls if calls else 0.0

        return {
            "calls": calls,
            **counts,
            "success_rate": rate(counts["ok"]),
            "error_rate": rate(counts["error"]),
            "timeout_rate": rate(counts["timeout"]),
            "latency_ms": {
                "p50": _pct(lat, 50),
                "p95": _pct(lat, 95),
                "p99": _pct(lat, 99),
                "mean": sum(lat) / len(lat) if lat else 0.0,
            },
            "zygote_restarts": restarts,
        }

    def close(self) -> None:
        """Stop the zygote, kill every process it left, delete the scratch space."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        if thread is None:  # never used: no process was ever started
            self._close_wake()
            return
        self._wake()
        if thread is not threading.current_thread():
            thread.join(30)

    async def aclose(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.close)

    # --- submission ----------------------------------------------------------
    def _submit(self, code: str, auto_print: bool = True) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("Sandbox is closed")
            self._next_id += 1
            job = _Job(self._next_id, code, future, auto_print)
            self._pending.append(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._supervise, daemon=True, name="agenteval-sandbox")
                self._thread.start()
        future.add_done_callback(lambda f, jid=job.id: self._on_done(f, jid))
        self._wake()
        return future

    def _on_done(self, future: concurrent.futures.Future, job_id: int) -> None:
        if future.cancelled():  # an asyncio task was cancelled: kill its execution
            with self._lock:
                self._cancels.append(job_id)
            self._wake()

    def _wake(self) -> None:
        with self._lock:
            if self._wake_w < 0:
                return
            try:
                os.write(self._wake_w, b"x")
            except OSError:
                pass  # pipe full: the supervisor is awake anyway

    def _close_wake(self) -> None:
        with self._lock:
            _close_fds(self._wake_r, self._wake_w)
            self._wake_r = self._wake_w = -1

    # --- supervisor thread ---------------------------------------------------
    def _supervise(self) -> None:
        try:
            while self._step():
                pass
        finally:
            self._shutdown()

    def _step(self) -> bool:
        with self._lock:
            if self._closed:
                return False
            want = bool(self._pending)
        if self._zygote is not None and self._zygote.returncode() is not None:
            # died since the last look: fail its calls now, before a new zygote takes work
            # (else they wait for the backstop, which would then kill the replacement)
            self._lost_zygote("the sandbox process died")
        if want and self._zygote is None:
            if not self._start_zygote():
                return True
        self._dispatch()
        fds = [self._wake_r] + ([self._zygote.fileno()] if self._zygote else [])
        ready, _, _ = select.select(fds, [], [], self._backstop_wait())
        if self._wake_r in ready:
            _drain(self._wake_r)
        if self._zygote is not None:
            msgs = self._zygote.read_messages(0)
            if msgs is None:
                self._lost_zygote("the sandbox process died")
            else:
                for msg in msgs:
                    self._on_message(msg)
        self._check_backstop()
        return True

    def _start_zygote(self) -> bool:
        cfg = self._config
        try:
            _, got = resolve(cfg.level)
            if os.geteuid() != 0:  # keeps same-uid children out of our /proc/<pid>/environ
                _linux.prctl(_linux.PR_SET_DUMPABLE, 0)
            if self._base is None:
                self._base = tempfile.mkdtemp(prefix="agenteval-sandbox-")
                os.chmod(self._base, 0o711)  # uid 65534 must traverse to its scratch dir
            scratch = tempfile.mkdtemp(dir=self._base, prefix="z")
            os.chmod(scratch, 0o711)
            plan = Plan(
                uid_drop=got["uid_drop"],
                landlock=got["landlock"],
                seccomp=got["seccomp"],
                bwrap=got["bwrap"],
                preload=cfg.preload,
                limits=_limits(cfg),
                timeout_s=cfg.timeout_s,
                read_bytes=4 * cfg.output_chars + 4,
            )
            self._zygote = ZygoteProcess(plan, scratch, uuid.uuid4().hex)
            self._zygote.start()
            return True
        except (ZygoteStartError, RuntimeError, OSError) as exc:
            self._zygote = None
            with self._lock:
                jobs, self._pending = list(self._pending), collections.deque()
            for job in jobs:
                self._finish(job, error_result(f"could not start: {exc}", _since(job)))
            return False

    def _dispatch(self) -> None:
        if self._zygote is None:
            return
        batch: list[_Job] = []
        with self._lock:
            cancels, self._cancels = self._cancels, []
            cancels = [j for j in cancels if j in self._inflight]
            while self._pending and len(self._inflight) < self._config.workers:
                job = self._pending.popleft()
                if job.future.cancelled():
                    continue
                job.dispatched = time.monotonic()
                self._inflight[job.id] = job
                batch.append(job)
        try:
            for job in batch:
                self._zygote.send(
                    {"type": "run", "id": job.id, "code": job.code, "auto_print": job.auto_print}
                )
            for job_id in cancels:
                self._zygote.send({"type": "cancel", "id": job_id})
        except OSError:
            self._lost_zygote("the sandbox process closed its input")

    def _on_message(self, msg: dict) -> None:
        if msg.get("type") != "result":
            return
        with self._lock:
            job = self._inflight.pop(msg["id"], None)
        if job is None:
            return
        if job.future.cancelled():  # the caller gave up; not a sandbox outcome
            return
        cfg = self._config
        result = build_result(
            msg, cfg.timeout_s, cfg.output_chars, _since(job), read_bytes=4 * cfg.output_chars + 4
        )
        self._finish(job, result)

    def _finish(self, job: _Job, result: ExecutionResult) -> None:
        with self._lock:
            self._counts[result.status] += 1
            self._latencies.append(result.latency_s * 1000.0)
        _resolve(job, result)

    def _backstop_wait(self) -> float | None:
        with self._lock:
            starts = [j.dispatched for j in self._inflight.values() if j.dispatched]
        if not starts:
            return None
        due = min(starts) + self._config.timeout_s + _GRACE_S
        return max(0.0, due - time.monotonic())

    def _check_backstop(self) -> None:
        wait = self._backstop_wait()
        if wait is not None and wait <= 0.0:
            self._lost_zygote("the sandbox process stopped answering and was killed")

    def _lost_zygote(self, what: str) -> None:
        """Fail the calls in flight, kill every leftover, restart on the next call."""
        zygote, self._zygote = self._zygote, None
        code = zygote.returncode() if zygote else None
        survivors = zygote.kill() if zygote else []
        detail = f"{what} (exit status {code}); it was restarted"
        if survivors:
            detail += f"; {len(survivors)} processes could not be killed"
        with self._lock:
            jobs, self._inflight = list(self._inflight.values()), {}
            self._restarts += 1
            self._restart_reasons.append(detail)
        for job in jobs:
            self._finish(job, error_result(f"{detail} while this call was running", _since(job)))
        if zygote is not None:
            shutil.rmtree(zygote.scratch_root, ignore_errors=True)

    def _shutdown(self) -> None:
        if self._zygote is not None:
            self._zygote.stop()
        with self._lock:
            jobs = list(self._inflight.values()) + list(self._pending)
            self._inflight, self._pending = {}, collections.deque()
        for job in jobs:
            _resolve(job, error_result("the sandbox was closed", _since(job)))
        if self._base is not None:
            shutil.rmtree(self._base, ignore_errors=True)
        self._close_wake()

    # --- helpers for tests ---------------------------------------------------
    def _infrastructure_pids(self) -> list[int]:
        """The zygote's own processes (bwrap, its init, the zygote), outermost first."""
        zygote = self._zygote
        if zygote is None or zygote.proc is None:
            return []
        chain = [zygote.proc.pid]
        while os.path.basename(_procs.cmdline(chain[-1]).split(b"\0")[0]) == b"bwrap":
            kids = _procs.children(chain[-1])
            if not kids:
                break
            chain.append(kids[0])
        return chain

    def _stray_pids(self) -> list[int]:
        """Processes of this sandbox other than its infrastructure (running calls included)."""
        zygote = self._zygote
        if zygote is None:
            return []
        infra = set(self._infrastructure_pids())
        return [p for p in zygote.members() if p not in infra]


def _limits(cfg: SandboxConfig) -> dict:
    return {
        "cpu": math.ceil(cfg.timeout_s) + 1,
        "as": cfg.memory_mb << 20,
        "fsize": cfg.file_size_mb << 20,
        "nofile": cfg.open_files,
        "nproc": cfg.nproc,
    }


def _since(job: _Job) -> float:
    return time.perf_counter() - job.submitted


def _pct(sorted_values: list[float], pct: float) -> float:
    if not sorted_values:
        return 0.0
    k = min(len(sorted_values) - 1, max(0, math.ceil(pct / 100 * len(sorted_values)) - 1))
    return sorted_values[k]


def _resolve(job: _Job, result: ExecutionResult) -> None:
    try:
        job.future.set_result(result)
    except concurrent.futures.InvalidStateError:
        pass  # cancelled by the caller meanwhile


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except OSError:
        pass


def _close_fds(*fds: int) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


@atexit.register
def _close_all() -> None:
    for sandbox in list(_live):
        sandbox.close()
