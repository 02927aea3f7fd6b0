"""The zygote: a long-lived, single-threaded helper that forks one child per call.

Started by the evaluator as `python -I -B _zygote.py CONFIG_JSON` with a
minimal environment (optionally inside one bubblewrap). It imports the
preloads once, then reads JSON lines on stdin and answers JSON lines on
stdout. It enforces each call's wall timeout (killpg + sweep), reaps escaped
daemons as a child subreaper, reads the tail of each call's output and
deletes its scratch directory. Stdlib only, plus the preloads.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import shutil
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _child  # noqa: E402
import _procs  # noqa: E402
from _linux import PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG, prctl  # noqa: E402

sys.path.pop(0)

# Cheap stdlib modules math code reaches for: imported once here, free per call.
_STDLIB_WARM = (
    "math",
    "cmath",
    "fractions",
    "decimal",
    "itertools",
    "functools",
    "collections",
    "heapq",
    "bisect",
    "statistics",
    "random",
    "re",
    "json",
    "string",
    "operator",
    "typing",
    "dataclasses",
    "traceback",
    "tempfile",
)


class Call:
    def __init__(self, req: dict, pid: int, scratch: str, out_fd: int, err_fd: int, timeout: float) -> None:
        self.id = req["id"]
        self.pid = pid
        self.scratch = scratch
        self.out_fd, self.err_fd = out_fd, err_fd
        self.start = time.monotonic()
        self.deadline = self.start + timeout
        self.timeout = timeout
        self.reason: str | None = None  # "timeout" | "cancelled" once we killed it


class Zygote:
    def __init__(self, cfg: dict) -> None:
        self.cfg = cfg
        self.root = cfg["scratch_root"]
        self.calls: dict[int, Call] = {}
        self.by_id: dict[int, Call] = {}
        self.done: list[tuple[Call, int]] = []
        self.inbuf = b""
        self.req_fd = os.dup(0)  # protocol fds away from 0/1, which become /dev/null
        self.resp_fd = os.dup(1)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.close(null)
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGTERM, lambda *_: self.shutdown(0))
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        self.prep: _child.Prepared | None = None

    def send(self, msg: dict) -> None:
        data = (json.dumps(msg) + "\n").encode()
        while data:
            data = data[os.write(self.resp_fd, data) :]

    # --- calls -------------------------------------------------------------
    def start_call(self, req: dict) -> None:
        cid = int(req["id"])
        scratch = os.path.join(self.root, f"c{cid}")
        os.mkdir(scratch, 0o700)
        if self.cfg.get("uid_drop") is not None:
            os.chown(scratch, 65534, 65534)
        flags = os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
        # Output files live outside the call's scratch dir, so the code cannot swap them.
        out_fd = os.open(os.path.join(self.root, f"c{cid}.out"), flags, 0o600)
        err_fd = os.open(os.path.join(self.root, f"c{cid}.err"), flags, 0o600)
        pid = os.fork()
        if pid == 0:
            _child.child_main(
                self.prep, req["code"], scratch, out_fd, err_fd, bool(req.get("auto_print", True))
            )
        call = Call(req, pid, scratch, out_fd, err_fd, float(self.cfg["timeout_s"]))
        self.calls[pid] = call
        self.by_id[cid] = call
        self.send({"type": "started", "id": cid, "pid": pid})

    def kill_call(self, call: Call, reason: str) -> None:
        if call.reason is None:
            call.reason = reason
        _procs.killpg_quietly(call.pid)
        _procs.kill_quietly(call.pid)

    def _tail(self, fd: int) -> tuple[str, int]:
        size = os.fstat(fd).st_size
        want = int(self.cfg["read_bytes"])
        start = max(0, size - want)
        data = os.pread(fd, size - start, start)
        text = data.decode("utf-8", errors="replace")
        if start and text.startswith("\ufffd"):
            text = text.lstrip("\ufffd")  # a multibyte char cut in half by the tail
        return text, size

    def finish_call(self, call: Call, status: int) -> None:
        self.by_id.pop(call.id, None)
        swept = self.sweep()
        out, out_size = self._tail(call.out_fd)
        err, err_size = self._tail(call.err_fd)
        for fd in (call.out_fd, call.err_fd):
            os.close(fd)
        for suffix in (".out", ".err"):
            _unlink(os.path.join(self.root, f"c{call.id}{suffix}"))
        _rmtree(call.scratch)
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        self.send(
            {
                "type": "result",
                "id": call.id,
                "exit_code": code,
                "signal": sig,
                "reason": call.reason,
                "stdout": out,
                "stderr": err,
                "stdout_size": out_size,
                "stderr_size": err_size,
                "swept": swept,
                "run_s": time.monotonic() - call.start,
                "setup_failed": code == _child.SETUP_FAILED,
            }
        )

    def sweep(self) -> int:
        """Kill our children that are not running calls (escaped daemons) and their trees."""
        total = 0
        for _ in range(100):
            strays = [p for p in _procs.children(os.getpid()) if p not in self.calls]
            live = [p for p in strays if _procs.alive(p)]
            if live:
                total += _procs.kill_trees(live)
            self.reap()
            if not strays:
                break
            if not live:
                time.sleep(0.001)
        return total

    def reap(self) -> None:
        """Collect every exited child; queue finished calls (killpg first: pgid still held)."""
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None:
                return
            call = self.calls.get(info.si_pid)
            if call is not None:
                _procs.killpg_quietly(call.pid)  # its group dies with it
            _, status = os.waitpid(info.si_pid, 0)
            if call is not None:
                del self.calls[call.pid]
                self.done.append((call, status))

    # --- loop --------------------------------------------------------------
    def handle(self, line: bytes) -> None:
        req = json.loads(line)
        if req.get("type") == "cancel":
            call = self.by_id.get(int(req["id"]))
            if call is not None:
                self.kill_call(call, "cancelled")
        elif req.get("type") == "run":
            try:
                self.start_call(req)
            except Exception as exc:  # e.g. no space for the scratch dir: fail this call only
                self.send(
                    {
                        "type": "result",
                        "id": req["id"],
                        "error": f"{type(exc).__name__}: {exc}",
                        "exit_code": None,
                        "signal": None,
                        "reason": None,
                    }
                )

    def read_requests(self) -> bool:
        data = os.read(self.req_fd, 1 << 16)
        if not data:
            return False
        self.inbuf += data
        *lines, self.inbuf = self.inbuf.split(b"\n")
        for line in lines:
            if line.strip():
                self.handle(line)
        return True

    def check_deadlines(self) -> float | None:
        now = time.monotonic()
        wait: float | None = None
        for call in list(self.calls.values()):
            if call.reason is None and now >= call.deadline:
                self.kill_call(call, "timeout")
            elif call.reason is None:
                left = call.deadline - now
                wait = left if wait is None else min(wait, left)
        return wait if wait is None else max(wait, 0.0)

    def run(self) -> None:
        while True:
            timeout = self.check_deadlines()
            try:
                ready, _, _ = select.select([self.req_fd, self.wake_r], [], [], timeout)
            except InterruptedError:
                ready = []
            if self.wake_r in ready:
                try:
                    os.read(self.wake_r, 4096)
                except BlockingIOError:
                    pass
            self.reap()
            while self.done:
                self.finish_call(*self.done.pop(0))
            if self.req_fd in ready and not self.read_requests():
                self.shutdown(0)

    def shutdown(self, code: int) -> None:
        for call in list(self.calls.values()):
            self.kill_call(call, "cancelled")
        _procs.kill_trees(_procs.children(os.getpid()))
        deadline = time.monotonic() + 2
        while self.calls and time.monotonic() < deadline:
            self.reap()
            time.sleep(0.005)
        self.reap()
        for call, _status in self.done + [(c, 0) for c in self.calls.values()]:
            for fd in (call.out_fd, call.err_fd):
                os.close(fd)
            _rmtree(call.scratch)
        os._exit(code)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _rmtree(path: str) -> None:
    def fix(func, p, _exc):  # the code may have chmod'ed its files to 000
        try:
            os.chmod(os.path.dirname(p), 0o700)
            os.chmod(p, 0o700)
            func(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=fix)


def _preload(names: list[str]) -> dict:
    errors = {}
    for name in list(_STDLIB_WARM) + names:
        try:
            importlib.import_module(name)
        except Exception as exc:  # reported in the hello, the zygote still serves
            if name in names:
                errors[name] = f"{type(exc).__name__}: {exc}"
    return errors


def main() -> None:
    cfg = json.loads(sys.argv[1])
    prctl(PR_SET_CHILD_SUBREAPER, 1)  # orphaned grandchildren come back to us for the sweep
    if cfg.get("pdeathsig"):
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != cfg["parent_pid"]:
            os._exit(1)
    zygote = Zygote(cfg)
    errors = _preload(list(cfg.get("preload", [])))
    zygote.prep = _child.Prepared(cfg)
    threads = len(os.listdir("/proc/self/task"))
    zygote.send(
        {
            "type": "hello",
            "pid": os.getpid(),
            "preload_errors": errors,
            "threads": threads,
            "landlock_abi": zygote.prep.landlock_abi,
            "python": sys.version.split()[0],
        }
    )
    zygote.run()


if __name__ == "__main__":
    main()
