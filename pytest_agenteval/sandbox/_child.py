"""What the forked child does: contain itself, then run the model's code.

Runs in the single-threaded child of the zygote, so Landlock and seccomp
(which bind only the calling thread) cover everything the code can do.
Stdlib only: the zygote imports this module as a top-level file.
"""

from __future__ import annotations

import ast
import linecache
import os
import resource
import signal
import sys
import traceback
import types

import _landlock
import _privdrop
import _seccomp
from _linux import PR_SET_PDEATHSIG, prctl

SETUP_FAILED = 197  # exit code that tells the zygote containment could not be applied
FILENAME = "<string>"  # what `python -c` shows in tracebacks


class Prepared:
    """What the zygote computes once and every child reuses."""

    def __init__(self, cfg: dict) -> None:
        self.cfg = cfg
        self.zygote_pid = os.getpid()
        self.devnull = os.open(os.devnull, os.O_RDWR)
        self.landlock_abi = 0
        self.landlock_static: list[tuple[int, bool, int]] = []
        if cfg.get("landlock"):
            self.landlock_abi = _landlock.abi_version()
            ro = _landlock.open_paths(read_paths(cfg.get("preload", [])))
            dev = _landlock.open_paths(["/dev/null"])
            self.landlock_static = [(fd, d, _landlock.READ_ONLY) for fd, d in ro]
            self.landlock_static += [(fd, d, _landlock.READ_WRITE_DEV) for fd, d in dev]
        self.seccomp_prog = _seccomp.build_filter() if cfg.get("seccomp") else b""


def read_paths(preload: list[str]) -> list[str]:
    """The read-only allow-list: system libraries, the interpreter, the preloads.

    sys.path entries outside the prefixes are left out on purpose: an editable
    install would otherwise expose a source checkout (and its .env files).
    """
    paths = [
        "/usr",
        "/lib",
        "/lib64",
        "/lib32",
        "/bin",
        "/etc/ld.so.cache",
        "/etc/localtime",
        "/etc/passwd",
        "/etc/group",
        "/etc/nsswitch.conf",
        "/dev/zero",
        "/dev/urandom",
        "/dev/random",
        "/sys/devices/system/cpu",
        "/proc/cpuinfo",
        "/proc/meminfo",
    ]
    paths += {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    for name in preload:
        mod = sys.modules.get(name)
        file = getattr(mod, "__file__", None)
        if file:
            paths.append(os.path.dirname(file) if hasattr(mod, "__path__") else file)
    return paths


def _set_limits(limits: dict) -> None:
    cpu = int(limits["cpu"])
    pairs = {
        resource.RLIMIT_CPU: cpu,  # soft == hard: SIGKILL even if SIGXCPU is ignored
        resource.RLIMIT_AS: int(limits["as"]),
        resource.RLIMIT_FSIZE: int(limits["fsize"]),
        resource.RLIMIT_NOFILE: int(limits["nofile"]),
        resource.RLIMIT_CORE: 0,
        resource.RLIMIT_NPROC: int(limits["nproc"]),
    }
    for which, value in pairs.items():
        resource.setrlimit(which, (value, value))


def _step(name: str, fn, *args) -> None:
    try:
        fn(*args)
    except Exception as exc:
        raise RuntimeError(f"{name}: {exc}") from exc


def contain(prep: Prepared, scratch: str, out_fd: int, err_fd: int) -> None:
    """Apply every configured layer to this (child) process, in a safe order."""
    cfg = prep.cfg
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.setsid()  # own session and process group: killpg reaches everything it spawns
    _step("rlimits", _set_limits, cfg["limits"])
    drop = cfg.get("uid_drop")
    if drop is not None:
        _step("uid_drop", _privdrop.drop_to_nobody, bool(drop["keep_read_search"]))
    # After the uid change: credential changes clear the parent-death signal.
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != prep.zygote_pid:
        os._exit(SETUP_FAILED)
    os.dup2(prep.devnull, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    os.chdir(scratch)
    for key in ("HOME", "TMPDIR", "MPLCONFIGDIR", "PWD"):
        os.environ[key] = scratch
    if prep.landlock_abi:
        own = _landlock.open_paths([scratch, "/proc/self"])
        rules = list(prep.landlock_static)
        rules += [
            (fd, d, _landlock.SCRATCH if i == 0 else _landlock.READ_ONLY) for i, (fd, d) in enumerate(own)
        ]
        _step("landlock", _landlock.restrict, prep.landlock_abi, rules)
    os.closerange(3, 1 << 16)  # zygote pipes, O_PATH fds, the other calls' output files
    if prep.seccomp_prog:
        _step("seccomp", _seccomp.install, prep.seccomp_prog)


def _fresh_interpreter_state(scratch: str) -> dict:
    sys.stdin = open(0, closefd=False)
    # Line-buffered (buffering=1): output printed before a kill is not lost.
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)
    sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    sys.argv = ["-c"]
    if "tempfile" in sys.modules:
        sys.modules["tempfile"].tempdir = None
    if "numpy.random" in sys.modules:  # children would otherwise share the zygote's RNG
        sys.modules["numpy.random"].seed()
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = main
    return main.__dict__


def _user_traceback(exc: BaseException) -> None:
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next  # hide the runner's own frames, like `python -c`
    traceback.print_exception(type(exc), exc, tb)


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def run_code(code: str, namespace: dict, auto_print: bool = True) -> int:
    """Execute code; with `auto_print`, like a notebook cell (a trailing expression's repr
    is printed), else exactly as the ReTool lab's evaluator's sandbox runs it."""
    if not auto_print:
        return _run_as_written(code, namespace)
    linecache.cache[FILENAME] = (len(code), None, code.splitlines(True), FILENAME)
    try:
        tree = ast.parse(code, FILENAME)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, FILENAME, "exec"), namespace)
        if last is not None:
            value = eval(compile(last, FILENAME, "eval"), namespace)
            if value is not None:
                print(repr(value))
        return 0
    except SystemExit as exc:
        return _exit_code(exc)
    except BaseException as exc:  # the model's exception, MemoryError included
        _user_traceback(exc)
        return 1


LAB_FILENAME = "<sandbox>"  # the ReTool lab's `exec(compile(code, '<sandbox>', 'exec'))`
LAB_BOOTSTRAP_FRAME = '  File "<string>", line 3, in <module>\n'  # its `python -c` bootstrap line


def _run_as_written(code: str, namespace: dict) -> int:
    """The lab's sandbox.py semantics: no auto-print, and its traceback shape (the
    bootstrap frame, then the code's frames without source lines)."""
    try:
        exec(compile(code, LAB_FILENAME, "exec"), namespace)
        return 0
    except SystemExit as exc:
        return _exit_code(exc)
    except BaseException as exc:
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next
        lines = ["Traceback (most recent call last):\n", LAB_BOOTSTRAP_FRAME]
        lines += traceback.format_list(traceback.extract_tb(tb))
        lines += traceback.format_exception_only(type(exc), exc)
        sys.stderr.write("".join(lines))
        return 1


def child_main(
    prep: Prepared, code: str, scratch: str, out_fd: int, err_fd: int, auto_print: bool = True
) -> None:
    """Entry point right after fork(); never returns."""
    status = SETUP_FAILED
    try:
        try:
            contain(prep, scratch, out_fd, err_fd)
            namespace = _fresh_interpreter_state(scratch)
        except BaseException as exc:
            msg = f"sandbox setup failed: {exc}\n".encode()
            try:
                os.write(err_fd, msg)
            except OSError:  # already closed: fd 2 is the same file by then
                os.write(2, msg)
            os._exit(SETUP_FAILED)
        status = run_code(code, namespace, auto_print)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass  # e.g. EFBIG after a print flood
    finally:
        os._exit(status)
