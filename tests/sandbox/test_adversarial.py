"""The sandbox against hostile code, on the real machine, at every available level.

Each attack asserts exactly what happened. Expectations are derived from the
containment report, so the suite states the weaker guarantees of the basic
level precisely instead of skipping them: "auto" is the strongest level this
machine offers, "landlock" is the strong level without bubblewrap (run only
when it differs from "auto"), "basic" simulates every stronger layer missing.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from pytest_agenteval.sandbox import Sandbox, SandboxConfig, probe_containment

REPO = Path(__file__).resolve().parents[2]
# the configured wall timeout of the module's sandboxes: every call that must finish does so
# in well under a tenth of it; the calls that must time out wait it out (3 levels x 2 calls)
TIMEOUT = 1.0
LEVELS = ["auto", "landlock", "basic"]


def _layers(level: str) -> list[str]:
    return probe_containment(level)["layers"]


FILE_SIZE_MB = 4


@pytest.fixture(scope="module", params=LEVELS)
def sb(request):
    level = request.param
    if level == "landlock" and _layers("landlock") == _layers("auto"):
        pytest.skip("the strongest level here is already Landlock + seccomp (no bubblewrap)")
    # a 4 MiB RLIMIT_FSIZE (32 by default): the print flood fills its output file in an eighth
    # of the time, well inside TIMEOUT on a busy machine
    config = SandboxConfig(
        level=level, timeout_s=TIMEOUT, memory_mb=1024, file_size_mb=FILE_SIZE_MB, workers=4
    )
    sandbox = Sandbox(config)
    assert sandbox.run_sync("pass").status == "ok"  # start the zygote outside the timings
    yield sandbox
    sandbox.close()


@pytest.fixture()
def rep(sb) -> dict:
    return sb.containment


def blocks_network(rep: dict) -> bool:
    return "seccomp" in rep["layers"] or "bwrap" in rep["layers"]


def confines_files(rep: dict) -> bool:
    return "landlock" in rep["layers"] or "bwrap" in rep["layers"]


def blocks_fork(rep: dict) -> bool:
    return "seccomp" in rep["layers"]


def root_child(rep: dict) -> bool:
    layers = rep["layers"]
    return rep["details"]["euid"] == 0 and "uid_nobody" not in layers and "bwrap" not in layers


def weak(rep: dict, topic: str) -> bool:
    return any(w.startswith(topic) for w in rep["weak_guarantees"])


@pytest.fixture
def forks_alone():
    """uid 65534's RLIMIT_NPROC (64 processes) is one budget for the whole machine, so
    tests that fork take turns with the fork bomb across xdist workers."""
    with open(os.path.join(tempfile.gettempdir(), "agenteval-sandbox-forks.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture
def world_dir():
    """A fresh directory that uid 65534 can enter (0711), under the system temp dir, as the
    sandbox's own base is: pytest's tmp_path sits below a 0700 folder of the evaluator that a
    call run as uid 65534 can only traverse where it keeps CAP_DAC_READ_SEARCH (an interpreter
    that is not world-readable), so what a test puts there would mean different things."""
    path = Path(tempfile.mkdtemp(prefix="agenteval-world-"))
    path.chmod(0o711)
    assert all(p.stat().st_mode & 0o001 for p in path.parents), f"{path}: an ancestor is not o+x"
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def wait_no_strays(sb: Sandbox, timeout: float = 3.0) -> list[int]:
    deadline = time.monotonic() + timeout
    strays = sb._stray_pids()
    while strays and time.monotonic() < deadline:
        time.sleep(0.05)
        strays = sb._stray_pids()
    return strays


@pytest.fixture(scope="module")
def timed_out(sb):
    """One call per level that prints a line unflushed, then loops forever: the zygote kills
    it at its deadline (killpg and sweep, whatever the code is doing), so the two tests below
    share it, one timeout waited out instead of two. (The result, the strays left after it.)"""
    result = sb.run_sync("print('before', flush=False)\nwhile True:\n    pass")
    return result, wait_no_strays(sb)


def test_infinite_loop_times_out_near_the_configured_timeout(timed_out):
    result, strays = timed_out
    assert result.status == "timeout"
    assert TIMEOUT <= result.latency_s < TIMEOUT * 1.5  # half of it for the kill, the sweep, the reply
    assert f"TimeoutError: execution exceeded {TIMEOUT:g} s" in result.output
    assert strays == []


def test_partial_output_survives_the_timeout(timed_out):
    result, _ = timed_out
    assert result.status == "timeout"
    assert result.output.startswith("before\n")


def test_memory_bomb_raises_memory_error_and_evaluator_is_unaffected(sb):
    huge = sb.run_sync("x = ' ' * 10**11")
    # np.empty does not touch its pages: the 1 GiB RLIMIT_AS is reached in milliseconds
    growing = sb.run_sync("import numpy as np\na = []\nwhile True:\n    a.append(np.empty(10**8, np.uint8))")
    assert (huge.status, growing.status) == ("error", "error")
    assert huge.output.rstrip().endswith("MemoryError")
    assert growing.output.rstrip().endswith(
        "Unable to allocate 95.4 MiB for an array with shape (100000000,) and data type uint8"
    )
    assert sb.run_sync("print(6 * 7)").output == "42\n"


def test_a_crash_is_reported_as_killed(sb):
    result = sb.run_sync("import ctypes\nctypes.string_at(0)")
    assert result.status == "killed"
    assert result.output == "Killed by SIGSEGV"


def test_fork_bomb_is_contained_and_leaves_no_process(sb, rep, forks_alone):
    if not blocks_fork(rep) and root_child(rep):
        pytest.skip("an uncapped root fork bomb would swamp the machine; see weak_guarantees")
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    future = sb._submit(bomb)
    time.sleep(TIMEOUT / 2)  # mid-call: the bomb has had time to fill what it may
    during = len(sb._stray_pids())
    result = future.result()
    assert result.status == "timeout"
    if blocks_fork(rep):
        assert during == 1  # only the call's own process: every fork was refused
    else:
        assert 1 < during <= 64  # RLIMIT_NPROC of uid 65534 (or of the evaluator's user)
        assert any("fork is allowed, capped by RLIMIT_NPROC" in w for w in rep["weak_guarantees"])
    assert wait_no_strays(sb) == []


def test_setsid_children_of_a_fork_spree_are_swept(sb, rep, forks_alone):
    code = textwrap.dedent("""
        import os, time
        made = 0
        try:
            for _ in range(20):
                if os.fork() == 0:
                    os.setsid()
                    time.sleep(60)
                    os._exit(0)
                made += 1
        except OSError as exc:
            print("FORK_DENIED", type(exc).__name__)
        print("MADE", made)
    """)
    result = sb.run_sync(code)
    assert result.status == "ok"
    if blocks_fork(rep):
        assert result.output == "FORK_DENIED PermissionError\nMADE 0\n"
    else:
        assert result.output == "MADE 20\n"
    assert wait_no_strays(sb, timeout=1.0) == []


def test_print_flood_is_capped_and_returns_quickly(sb):
    result = sb.run_sync("while True:\n    print('x' * 1000)")
    assert result.status == "error"  # RLIMIT_FSIZE: the 4 MiB output file is full
    assert result.output.rstrip().endswith("OSError: [Errno 27] File too large")
    assert len(result.output) <= 4096 and result.truncated
    assert result.latency_s < TIMEOUT


def test_file_size_is_bounded(sb):
    assert SandboxConfig().file_size_mb == 32  # the product's bound (this module's sandboxes: 4 MiB)
    under = sb.run_sync(f"open('fits', 'wb').write(b'0' * ({FILE_SIZE_MB - 1} << 20))")
    assert under.status == "ok"
    result = sb.run_sync(f"open('big', 'wb').write(b'0' * ({FILE_SIZE_MB + 1} << 20))")
    assert result.status == "error"
    assert result.output.rstrip().endswith("OSError: [Errno 27] File too large")


def test_connecting_to_a_local_listener(sb, rep):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    code = textwrap.dedent(f"""
        import socket
        try:
            s = socket.create_connection(("127.0.0.1", {port}), timeout=1)
            s.sendall(b"hello")
            print("CONNECTED")
        except OSError as exc:
            print("BLOCKED", type(exc).__name__)
    """)
    result = sb.run_sync(code)
    try:
        conn, _ = listener.accept()
        conn.close()
        received = True
    except TimeoutError:
        received = False
    finally:
        listener.close()
    if blocks_network(rep):
        assert result.output == "BLOCKED PermissionError\n"
        assert received is False
    else:
        assert result.output == "CONNECTED\n" and received is True
        assert weak(rep, "network: sockets are allowed")


_EVALUATOR = textwrap.dedent("""
    import json, os, sys
    from pytest_agenteval.sandbox import Sandbox, SandboxConfig
    sb = Sandbox(SandboxConfig(level=sys.argv[1], timeout_s=5, preload=()))
    result = sb.run_sync(sys.stdin.read())
    print(json.dumps({"pid": os.getpid(), "output": result.output, "status": result.status,
                      "strays": sb._stray_pids(), "rep": sb.containment}))
    sb.close()
""")

_STEAL_ENV = textwrap.dedent("""
    import os
    print("ENV", os.environ.get("AGENTEVAL_TEST_API_KEY"))
    found, readable = [], 0
    try:
        pids = [d for d in os.listdir("/proc") if d.isdigit()]
    except OSError:  # listing /proc is denied: guess instead
        pids = [str(p) for p in range(1, 100000)]
    pids += [str(os.getppid()), "self"]
    for pid in pids:
        try:
            data = open(f"/proc/{pid}/environ", "rb").read()
        except OSError:
            continue
        readable += 1
        found += [e.decode() for e in data.split(b"\\0") if e.startswith(b"AGENTEVAL_TEST_")]
    print("FOUND", found)
""")


def test_evaluator_secret_is_invisible(sb, tmp_path):
    level = sb._config.level
    secret = "sk-test-" + os.urandom(8).hex()
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "AGENTEVAL_TEST_API_KEY": secret}
    script = tmp_path / "evaluator.py"
    script.write_text(_EVALUATOR)
    proc = subprocess.run(
        [sys.executable, str(script), level],
        input=_STEAL_ENV,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    if root_child(out["rep"]):
        pytest.skip("a root child can read every environ; see weak_guarantees")
    assert secret not in proc.stdout
    assert out["output"].splitlines()[0] == "ENV None"
    assert out["output"].splitlines()[1] == "FOUND []"
    assert out["strays"] == []


def test_writing_outside_the_scratch_dir_fails(sb, rep, world_dir):
    owned = world_dir / "owned"  # root-only (0700): the evaluator's private directory
    shared = world_dir / "shared"  # world-writable, like /tmp
    owned.mkdir(mode=0o700)
    shared.mkdir()
    shared.chmod(0o777)
    code = "\n".join(
        f"try:\n    open({str(d / 'pwned')!r}, 'w').write('x')\n    print('W')\n"
        "except OSError as e:\n    print(type(e).__name__)"
        for d in (owned, shared)
    )
    result = sb.run_sync(code)
    assert result.status == "ok"
    owned_written = (owned / "pwned").exists()
    shared_written = (shared / "pwned").exists()
    if confines_files(rep):
        assert (owned_written, shared_written) == (False, False)
    else:
        assert owned_written is not ("uid_nobody" in rep["layers"])
        assert shared_written is True and weak(rep, "files:")
    assert result.output.count("W\n") == owned_written + shared_written


def test_reading_the_evaluators_files(sb, rep, tmp_path):
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text("TOP-SECRET-42")
    secret_file.chmod(0o600)
    code = "\n".join(
        f"try:\n    print(open({p!r}).read()[:13])\nexcept OSError as e:\n"
        "    print('DENIED', type(e).__name__)"
        for p in (str(secret_file), "/etc/shadow")
    )
    result = sb.run_sync(code)
    lines = result.output.splitlines()
    if confines_files(rep):
        assert [line.split()[0] for line in lines] == ["DENIED", "DENIED"]
        assert "TOP-SECRET-42" not in result.output
    elif rep["details"]["keeps_cap_dac_read_search"] or root_child(rep):
        assert lines[0] == "TOP-SECRET-42" and not lines[1].startswith("DENIED")
        assert weak(rep, "files:")
    else:
        assert lines[1].startswith("DENIED")


def test_double_forked_setsid_daemon_does_not_outlive_the_call(sb, rep, forks_alone, world_dir):
    shared = world_dir / "shared"  # a surviving daemon run as uid 65534 could write here too
    shared.mkdir()
    shared.chmod(0o777)
    marker = shared / "daemon-was-here"
    code = textwrap.dedent(f"""
        import os, time
        try:
            pid = os.fork()
        except OSError as exc:
            print("FORK_DENIED", type(exc).__name__)
            raise SystemExit(0)
        if pid == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(0.5)
                open({str(marker)!r}, "w").write("alive")
                time.sleep(60)
            os._exit(0)
        os.waitpid(pid, 0)
        print("DAEMON_STARTED")
    """)
    result = sb.run_sync(code)
    expected = "FORK_DENIED PermissionError\n" if blocks_fork(rep) else "DAEMON_STARTED\n"
    assert result.output == expected
    assert wait_no_strays(sb, timeout=0.5) == []
    if not blocks_fork(rep):  # a daemon was started (where fork is refused, none was)
        time.sleep(1.0)  # twice the daemon's own wait before it writes: a survivor has written by now
    assert not marker.exists()


def _env_cleared_daemon(tag: str, then: str) -> str:
    """Double fork + setsid, then the grandchild re-executes itself with an EMPTY
    environment (no sandbox marker) under a command line the test can find."""
    return textwrap.dedent(f"""
        import os, sys, time
        try:
            pid = os.fork()
        except OSError as exc:
            print("FORK_DENIED", type(exc).__name__, flush=True)
            pid = None
        if pid == 0:
            os.setsid()
            if os.fork() == 0:
                argv = [sys.executable, "-c", "import time; time.sleep(120)", {tag!r}]
                os.execve(sys.executable, argv, {{}})
            os._exit(0)
        if pid:
            os.waitpid(pid, 0)
            print("DAEMON_STARTED", flush=True)
        {then}
    """)


def _pids_running(tag: str) -> list[int]:
    """Live processes whose command line carries tag (found without any environment)."""
    from pytest_agenteval.sandbox import _procs

    return [p for p in _procs._all_pids() if tag.encode() in _procs.cmdline(p) and _procs.alive(p)]


def _gone(tag: str, timeout: float = 3.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while _pids_running(tag) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _pids_running(tag)


def test_an_env_cleared_daemon_does_not_outlive_its_call(sb, rep, forks_alone):
    tag = f"agenteval-daemon-{os.urandom(6).hex()}"
    # the call lasts while the daemon it started gets going (none where fork is refused)
    result = sb.run_sync(_env_cleared_daemon(tag, "time.sleep(0.3 if pid else 0)"))
    expected = "FORK_DENIED PermissionError\n" if blocks_fork(rep) else "DAEMON_STARTED\n"
    assert result.output == expected
    assert _gone(tag) == []


def test_an_env_cleared_daemon_dies_with_a_killed_zygote(sb, rep, forks_alone):
    """The zygote (the daemons' subreaper) is killed mid-call, as the OOM killer or root
    code would: the daemon it adopted must still be found, without any marker."""
    tag = f"agenteval-daemon-{os.urandom(6).hex()}"
    future = sb._submit(_env_cleared_daemon(tag, "time.sleep(30)"))
    deadline = time.monotonic() + 5
    ready = (lambda: sb._stray_pids()) if blocks_fork(rep) else (lambda: _pids_running(tag))
    while not ready() and time.monotonic() < deadline:
        time.sleep(0.02)  # the call (fork refused) or the daemon is running
    started = bool(_pids_running(tag))
    os.kill(sb._infrastructure_pids()[-1], 9)
    result = future.result(timeout=20)
    assert (result.status, started) == ("sandbox_error", not blocks_fork(rep))
    if "cgroup" not in rep["layers"] and "bwrap" not in rep["layers"] and started:
        assert weak(rep, "processes: no cgroup holds the code's processes")
        pytest.skip("no cgroup here: the marker-free daemon escapes, as weak_guarantees says")
    assert _gone(tag) == []
    assert sb.run_sync("print('next')").output == "next\n"


def test_the_sandbox_token_is_not_visible_to_the_code(sb, rep):
    if "cgroup" not in rep["layers"]:
        pytest.skip("no cgroup here: the environment marker is the fallback and stays visible")
    # root's change to uid 65534 leaves the call non-dumpable (unless fs.suid_dumpable is 1):
    # its /proc/self files then belong to root, and only CAP_DAC_READ_SEARCH opens them (kept
    # where the interpreter is not world-readable). Hostile code makes itself dumpable again
    # (prctl is allowed) and reads its environment block anyway: so does this test, and the
    # token must not be in it, whichever way it was read.
    code = (
        "import ctypes, os\n"
        "print('AGENTEVAL' in str(sorted(os.environ)))\n"
        "try:\n"
        "    raw = open('/proc/self/environ', 'rb').read()\n"
        "except PermissionError:\n"
        "    assert ctypes.CDLL(None, use_errno=True).prctl(4, 1, 0, 0, 0) == 0  # PR_SET_DUMPABLE\n"
        "    raw = open('/proc/self/environ', 'rb').read()\n"
        "print(b'AGENTEVAL' in raw, len(raw) > 0)"
    )
    assert sb.run_sync(code).output == "False\nFalse True\n"


def test_killing_the_parent_does_not_break_the_sandbox(sb, rep):
    before = sb.stats()["zygote_restarts"]
    result = sb.run_sync("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('SENT')")
    abi = rep["details"]["landlock_abi"]
    if "uid_nobody" in rep["layers"] or ("landlock" in rep["layers"] and abi >= 6):
        assert result.status == "error"
        assert result.output.rstrip().endswith("PermissionError: [Errno 1] Operation not permitted")
        assert sb.stats()["zygote_restarts"] == before
    else:
        assert result.status == "sandbox_error" and "restarted" in result.output
        assert sb.stats()["zygote_restarts"] == before + 1
    assert sb.run_sync("print('still here')").output == "still here\n"


def test_environment_is_minimal(sb):
    result = sb.run_sync("import os\nprint(sorted(os.environ))")
    names = set(eval(result.output))
    allowed = {
        "PATH",
        "LANG",
        "LC_ALL",
        "HOME",
        "TMPDIR",
        "MPLCONFIGDIR",
        "PWD",
        "AGENTEVAL_SANDBOX_TOKEN",
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "NUMEXPR_NUM_THREADS",
        "VECLIB_MAXIMUM_THREADS",
        "BLIS_NUM_THREADS",
    }
    assert names <= allowed | {"LC_CTYPE"}  # bwrap may add LC_CTYPE


@pytest.mark.parametrize("victim", [0, -1], ids=["outermost", "zygote"])
def test_zygote_restarts_after_being_killed_mid_call(victim):
    sandbox = Sandbox(SandboxConfig(timeout_s=10, preload=()))
    try:
        assert sandbox.run_sync("print(1)").status == "ok"
        future = sandbox._submit("import time\ntime.sleep(30)")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not sandbox._stray_pids():
            time.sleep(0.02)  # until the call runs
        os.kill(sandbox._infrastructure_pids()[victim], 9)
        result = future.result(timeout=20)
        assert result.status == "sandbox_error"
        assert "the sandbox process died" in result.output and "restarted" in result.output
        assert sandbox.run_sync("print(2)").output == "2\n"
        assert sandbox.stats()["zygote_restarts"] == 1
        assert wait_no_strays(sandbox) == []
    finally:
        sandbox.close()


def test_close_leaves_no_process_behind():
    sandbox = Sandbox(SandboxConfig(timeout_s=10, preload=()))
    future = sandbox._submit("import time\ntime.sleep(30)")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not (sandbox._zygote and sandbox._stray_pids()):
        time.sleep(0.05)  # until the call runs
    infra = sandbox._infrastructure_pids()
    members = sandbox._zygote.members()  # cgroup (or marker + descendants): the call too
    sandbox.close()
    assert future.result(timeout=5).status == "sandbox_error"
    from pytest_agenteval.sandbox import _procs

    assert len(members) > len(infra)  # the sleeping call was among them
    assert not any(_procs.alive(p) for p in infra + members)


def test_usable_from_an_event_loop_in_another_thread():
    import asyncio

    sandbox = Sandbox(SandboxConfig(timeout_s=10, preload=()))  # constructed on this thread
    box: dict = {}

    async def main():
        return await asyncio.gather(*(sandbox.run(f"print({i})") for i in range(5)))

    def loop_thread():
        box["results"] = asyncio.run(main())

    thread = threading.Thread(target=loop_thread)
    thread.start()
    thread.join(60)
    # the loop and its thread are gone; the supervisor thread and zygote live on
    assert [r.output for r in box["results"]] == [f"{i}\n" for i in range(5)]
    assert sandbox.run_sync("print('alive')").output == "alive\n"
    sandbox.close()
