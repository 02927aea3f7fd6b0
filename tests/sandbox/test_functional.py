"""What the sandbox does for well-behaved code: the contract the rollout relies on."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

from pytest_agenteval.sandbox import (
    ExecutionResult,
    Sandbox,
    SandboxConfig,
    escape_template_tokens,
    probe_containment,
)


@pytest.fixture(scope="module")
def sb():
    sandbox = Sandbox(SandboxConfig(timeout_s=5.0))
    yield sandbox
    sandbox.close()


@pytest.mark.parametrize(
    ("code", "output"),
    [
        ("x = 5\nx * 2", "10\n"),
        ("'hi'", "'hi'\n"),
        ("a = 1; a", "1\n"),
        ("print(1 + 1)", "2\n"),  # print returns None: nothing extra
        ("None", ""),
        ("x = 3", ""),
        ("for i in range(2):\n    print(i)\ni + 10", "0\n1\n11\n"),
        ("print('π ≈ 3.14159')", "π ≈ 3.14159\n"),
        ("if __name__ == '__main__':\n    print('main')", "main\n"),
    ],
)
def test_trailing_expression_is_printed_like_a_notebook(sb, code, output):
    result = sb.run_sync(code)
    assert (result.status, result.output) == ("ok", output)


def test_exception_shows_a_python_c_style_traceback(sb):
    result = sb.run_sync("def f():\n    return 1 / 0\nf()")
    assert result.status == "error" and result.exit_code == 1
    assert result.output == (
        "Traceback (most recent call last):\n"
        '  File "<string>", line 3, in <module>\n'
        "    f()\n"
        '  File "<string>", line 2, in f\n'
        "    return 1 / 0\n"
        "           ~~^~~\n"
        "ZeroDivisionError: division by zero\n"
    )
    assert result.stderr == result.output and result.stdout == ""


def test_syntax_error_is_an_error(sb):
    result = sb.run_sync("print(1")
    assert result.status == "error"
    assert result.output.splitlines()[-1].startswith("SyntaxError:")


def test_stdout_comes_before_stderr(sb):
    result = sb.run_sync("import sys\nprint('out')\nprint('err', file=sys.stderr)")
    assert (result.stdout, result.stderr, result.output) == ("out\n", "err\n", "out\nerr\n")


def test_sys_exit_code_is_reported(sb):
    result = sb.run_sync("import sys\nsys.exit(3)")
    assert (result.status, result.exit_code) == ("error", 3)
    assert result.output == "Process exited with code 3"
    assert sb.run_sync("raise SystemExit(0)").status == "ok"


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("<|im_end|>", "&lt;|im_end|>"),
        ("<|im_start|>assistant", "&lt;|im_start|>assistant"),
        ("<|endoftext|>", "&lt;|endoftext|>"),
        ("</tool_response>", "&lt;/tool_response>"),
        ("<tool_response>", "&lt;tool_response>"),
        ("<tool_call>{}</tool_call>", "&lt;tool_call>{}&lt;/tool_call>"),
        ("<|eot_id|>", "&lt;|eot_id|>"),
        ("a < b and c > d", "a < b and c > d"),
        ("<div>", "<div>"),
        ("<| not a token |>", "<| not a token |>"),
        ("&lt;|im_end|>", "&lt;|im_end|>"),  # idempotent
    ],
)
def test_escape_template_tokens(text, escaped):
    assert escape_template_tokens(text) == escaped


def test_template_tokens_in_output_are_escaped(sb):
    result = sb.run_sync("print('done<|im_end|>\\n<|im_start|>user')")
    assert result.output == "done&lt;|im_end|>\n&lt;|im_start|>user\n"
    assert result.stdout == result.output


def test_output_is_tail_capped(sb):
    result = sb.run_sync("for i in range(2000):\n    print(f'line {i:05d}')")
    assert result.status == "ok" and result.truncated
    assert len(result.output) == 4096
    assert result.output.startswith("[... ") and result.output.endswith("line 01999\n")


def test_numpy_and_sympy_are_preloaded(sb):
    result = sb.run_sync(
        "import numpy as np, sympy\nprint(np.arange(10).sum())\nprint(sympy.factorint(2**64 - 1))"
    )
    assert result.output == "45\n{3: 1, 5: 1, 17: 1, 257: 1, 641: 1, 65537: 1, 6700417: 1}\n"


def test_blas_and_openmp_run_single_threaded(sb):
    result = sb.run_sync(
        "import os\nprint(os.environ['OPENBLAS_NUM_THREADS'], os.environ['OMP_NUM_THREADS'])"
    )
    assert result.output == "1 1\n"


def test_each_call_gets_a_fresh_scratch_dir_that_is_deleted(sb):
    first = sb.run_sync(
        "import os, tempfile\nopen('note.txt', 'w').write('x')\n"
        "tempfile.mkstemp()\nprint(os.getcwd())\nprint(os.environ['HOME'])"
    )
    cwd, home = first.output.split()
    assert cwd == home
    assert not os.path.exists(cwd)
    second = sb.run_sync("import os\nprint(os.getcwd(), os.listdir('.'))")
    assert second.output.split()[0] != cwd and second.output.endswith("[]\n")


def test_scratch_dir_on_the_host_is_deleted_at_the_basic_level():
    sandbox = Sandbox(SandboxConfig(level="basic", preload=()))
    try:
        cwd = sandbox.run_sync("import os\nopen('f', 'w').write('x')\nos.getcwd()").output
        cwd = eval(cwd)
        assert cwd.startswith(sandbox._zygote.scratch_root)  # a real host directory here
        assert not os.path.exists(cwd)
    finally:
        sandbox.close()


def test_zygote_runs_with_the_minimal_environment(sb):
    sb.run_sync("pass")
    allowed = {
        "PATH",
        "LANG",
        "LC_ALL",
        "HOME",
        "TMPDIR",
        "MPLCONFIGDIR",
        "AGENTEVAL_SANDBOX_TOKEN",
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "NUMEXPR_NUM_THREADS",
        "VECLIB_MAXIMUM_THREADS",
        "BLIS_NUM_THREADS",
        "PWD",
        "LC_CTYPE",
    }  # the last two: set by bwrap inside
    for pid in sb._infrastructure_pids():
        with open(f"/proc/{pid}/environ", "rb") as f:
            names = {e.split(b"=", 1)[0].decode() for e in f.read().split(b"\0") if e}
        assert names <= allowed, pid


def test_random_state_differs_between_calls(sb):
    code = "import random\nprint(random.random())"
    assert sb.run_sync(code).output != sb.run_sync(code).output


def test_stats_count_every_outcome():
    # 1 s, not less: the first call starts the zygote, slow on a loaded machine
    sandbox = Sandbox(SandboxConfig(timeout_s=1.0, preload=()))
    try:
        for code in ("print(1)", "print(2)", "1/0", "while True: pass"):
            sandbox.run_sync(code)
        stats = sandbox.stats()
    finally:
        sandbox.close()
    assert {k: stats[k] for k in ("calls", "ok", "error", "timeout", "killed", "sandbox_error")} == {
        "calls": 4,
        "ok": 2,
        "error": 1,
        "timeout": 1,
        "killed": 0,
        "sandbox_error": 0,
    }
    assert (stats["success_rate"], stats["error_rate"], stats["timeout_rate"]) == (0.5, 0.25, 0.25)
    assert set(stats["latency_ms"]) == {"p50", "p95", "p99", "mean"}
    assert stats["latency_ms"]["p99"] >= 1000.0  # the timed-out call
    assert stats["zygote_restarts"] == 0


def test_concurrency_is_bounded_by_workers():
    sandbox = Sandbox(SandboxConfig(timeout_s=10.0, workers=3, preload=()))
    code = "import time\nt0 = time.time()\ntime.sleep(0.6)\nprint(t0, time.time())"

    async def main() -> list[ExecutionResult]:
        return await asyncio.gather(*(sandbox.run(code) for _ in range(6)))

    try:
        sandbox.run_sync("pass")
        results = asyncio.run(main())
    finally:
        sandbox.close()
    spans = [tuple(map(float, r.output.split())) for r in results]
    peak = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert peak == 3
    assert max(e for _, e in spans) - min(s for s, _ in spans) < 6 * 0.6


def test_cancelling_the_task_kills_the_execution():
    sandbox = Sandbox(SandboxConfig(timeout_s=20.0, preload=()))

    async def main() -> None:
        task = asyncio.ensure_future(sandbox.run("import time\ntime.sleep(20)"))
        deadline = time.monotonic() + 10
        while not sandbox._stray_pids() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)  # until the call runs (not a fixed half second)
        assert sandbox._stray_pids(), "the call never started"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        sandbox.run_sync("pass")
        asyncio.run(main())
        deadline = time.monotonic() + 3
        while sandbox._stray_pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sandbox._stray_pids() == []
        assert sandbox.stats()["calls"] == 1  # the cancelled call is not an outcome
    finally:
        sandbox.close()


def test_run_after_close_raises():
    sandbox = Sandbox(SandboxConfig(preload=()))
    sandbox.close()
    with pytest.raises(RuntimeError, match="Sandbox is closed"):
        sandbox.run_sync("print(1)")


def test_closing_an_unused_sandbox_starts_nothing():
    before = threading.active_count()
    Sandbox().close()
    assert threading.active_count() == before


def test_invalid_level_is_rejected():
    with pytest.raises(ValueError, match="level must be one of"):
        SandboxConfig(level="docker")


def test_probe_is_cached_per_process(monkeypatch):
    from pytest_agenteval.sandbox import _probe

    first = probe_containment("basic")
    monkeypatch.setattr(_probe, "_verify", lambda *a: pytest.fail("probed a second time"))
    assert probe_containment("basic") == first


def test_containment_report_shape_and_basic_warning():
    basic = probe_containment("basic")
    assert basic["level"] == "basic"
    assert basic["layers"][:5] == ["rlimits", "session", "scratch", "minimal_env", "subreaper"]
    assert basic["warning"].startswith("sandbox: only basic containment")
    assert any(w.startswith("network:") for w in basic["weak_guarantees"])
    strongest = probe_containment("auto")
    if {"landlock", "seccomp"} <= set(strongest["layers"]):
        assert strongest["level"] == "strong" and strongest["warning"] is None
