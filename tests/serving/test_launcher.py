"""The launcher against real processes: a real `python -m llama_cpp.server` on the
embedded SmolLM2 gguf, a real foreign server on the port, a real bad flag, a "server"
that never opens its port, and a wrapper that forks a grandchild."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.models.serve.commands import ServerSpec, llama_cpp_command
from pytest_agenteval.models.serve.launcher import (
    ACTIVE,
    LaunchError,
    free_port,
    group_empty,
    group_members,
    launch,
    list_models,
    stop,
)
from pytest_agenteval.models.serve.resolve import ResolvedModel, resolve_model_path

# Forks a long-lived grandchild, then becomes the real server: teardown must reach both.
WRAPPER = """
import os, subprocess, sys
child = subprocess.Popen(["sleep", "300"])
print(f"GRANDCHILD {child.pid}", flush=True)
os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
"""


@pytest.fixture(scope="module")
def smollm() -> ResolvedModel:
    from pytest_agenteval.models import embedded_model_path

    return resolve_model_path(str(embedded_model_path()))


def running(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def wait_until(condition, limit_s: float = 20.0) -> bool:
    """Poll for a state change (not a timing assertion: the limit only bounds a hang)."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def wrapped(spec: ServerSpec, wrapper: Path) -> ServerSpec:
    return ServerSpec(**{**spec.__dict__, "argv": (sys.executable, str(wrapper), *spec.argv[1:])})


def grandchild_of(log: Path) -> int:
    wait_until(lambda: "GRANDCHILD" in log.read_text())
    line = next(x for x in log.read_text().splitlines() if x.startswith("GRANDCHILD"))
    return int(line.split()[1])


@pytest.fixture(scope="module")
def wrapped_server(smollm: ResolvedModel, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One real llama.cpp server launched through WRAPPER (a forked grandchild beside it),
    looked at while up, then stopped: what the start-up test and the teardown test assert on
    (merged: one model load for both; the key checks read the same launch either way)."""
    folder = tmp_path_factory.mktemp("wrapped")
    wrapper, log = folder / "wrapper.py", folder / "server.log"
    wrapper.write_text(WRAPPER)
    seen: dict[str, Any] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("API_KEY", "stray-parent-key")  # must neither leak in nor be overwritten
        held, port = free_port()
        spec = wrapped(llama_cpp_command(smollm, port, n_threads=1, n_ctx=512), wrapper)
        server = launch(spec, log, timeout_s=120, held=held)
        try:
            grandchild = grandchild_of(log)
            seen.update(
                spec=spec, server=server, log=log, grandchild=grandchild,
                grandchild_running=running(grandchild), members=len(group_members(server.pid)),
                with_key=list_models(spec.url, server.key), without_key=list_models(spec.url, None),
                stray_key=list_models(spec.url, "stray-parent-key"), parent_key=os.environ["API_KEY"],
                active=server in ACTIVE,
            )  # fmt: skip
        finally:
            seen["stopped"] = stop(server)
    seen.update(
        grandchild_after=running(grandchild),
        group_empty=group_empty(server.pid),
        active_after=server in ACTIVE,
    )
    return seen


def test_start_up_is_ours_keyed_and_torn_down(wrapped_server: dict[str, Any], smollm: ResolvedModel) -> None:
    seen = wrapped_server
    server, spec = seen["server"], seen["spec"]
    assert server.key and len(server.key) >= 24
    assert seen["with_key"] == (200, [smollm.served_name])
    assert seen["without_key"][0] == 401  # the per-launch key is required
    assert server.key not in " ".join(spec.argv)
    assert seen["stray_key"][0] == 401
    assert seen["parent_key"] == "stray-parent-key"  # our key lives in the child's env only
    assert server.key not in seen["log"].read_text()
    assert seen["active"]
    assert seen["stopped"] is None
    assert seen["group_empty"]
    assert not seen["active_after"]


def test_a_foreign_server_on_the_port_is_refused(
    llama_server: str, smollm: ResolvedModel, tmp_path: Path
) -> None:
    port = int(llama_server.rsplit(":", 1)[1].split("/")[0])
    # our "server" never binds; the one answering on the port is someone else's (alias smollm2)
    spec = ServerSpec(
        "llama-cpp", (sys.executable, "-c", "import time; time.sleep(60)"), port, "agenteval-x", None
    )
    with pytest.raises(LaunchError) as info:
        launch(spec, tmp_path / "server.log", timeout_s=60)
    assert str(info.value).startswith(
        f"llama-cpp server on http://127.0.0.1:{port}/v1 is not ours: it answers HTTP 200 and lists "
        "['smollm2'], not agenteval-x (another process holds the port?); log "
    )
    assert not ACTIVE


def test_a_bad_flag_is_one_line_with_the_log_tail(smollm: ResolvedModel, tmp_path: Path) -> None:
    held, port = free_port()
    spec = llama_cpp_command(smollm, port, n_threads=1, n_ctx=512, extra=("--no-such-flag",))
    log = tmp_path / "server.log"
    with pytest.raises(LaunchError) as info:
        launch(spec, log, timeout_s=120, held=held)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"llama-cpp server exited with code 2 before it was ready; log {log}: ")
    assert "error: unrecognized arguments: --no-such-flag" in message
    assert message.endswith(f"; command: {' '.join(spec.argv)}")


def test_a_server_that_never_gets_ready_times_out_with_progress_lines(tmp_path: Path) -> None:
    held, port = free_port()
    # a shell, not a second interpreter: it prints as soon as the guard has started it
    spec = ServerSpec(
        "llama-cpp", ("sh", "-c", "echo loading...; exec sleep 99"), port, "agenteval-x", None, grace_s=1.0
    )  # fmt: skip
    lines: list[str] = []
    with pytest.raises(LaunchError) as info:
        launch(
            spec, tmp_path / "server.log", timeout_s=1.5, held=held, say=lines.append, progress_every_s=0.5
        )
    assert str(info.value).startswith(
        f"llama-cpp server was not ready after 1.5 s (--serve-timeout); log {tmp_path / 'server.log'}: "
    )
    assert "loading..." in str(info.value)
    assert lines and lines[0].startswith(f"agenteval: waiting for the llama-cpp server on {spec.url} (")
    # the last: on a loaded machine the child may print only after the first line (0.5 s)
    assert lines[-1].endswith("last log line: loading...")
    assert not ACTIVE


def test_teardown_reaches_a_forked_grandchild(wrapped_server: dict[str, Any]) -> None:
    seen = wrapped_server
    assert seen["grandchild_running"]
    assert seen["members"] == 3  # guard, server, sleep
    assert seen["stopped"] is None
    assert not seen["grandchild_after"]
    assert seen["group_empty"]


CONTROLLER = """
import sys
from pathlib import Path
from pytest_agenteval.models.serve.commands import ServerSpec, llama_cpp_command
from pytest_agenteval.models.serve.launcher import free_port, launch
from pytest_agenteval.models.serve.resolve import resolve_model_path

model = resolve_model_path(sys.argv[1])
held, port = free_port()
spec = llama_cpp_command(model, port, n_threads=1, n_ctx=512)
spec = ServerSpec(**{**spec.__dict__, "argv": (sys.executable, sys.argv[2], *spec.argv[1:])})
server = launch(spec, Path(sys.argv[3]), timeout_s=120, held=held)
print("READY", server.pid, flush=True)
sys.stdin.read()  # until killed
"""


def test_a_sigkilled_controller_leaves_no_server(smollm: ResolvedModel, tmp_path: Path) -> None:
    wrapper, script, log = tmp_path / "wrapper.py", tmp_path / "controller.py", tmp_path / "server.log"
    wrapper.write_text(WRAPPER)
    script.write_text(textwrap.dedent(CONTROLLER))
    controller = subprocess.Popen(
        [sys.executable, str(script), str(smollm.path), str(wrapper), str(log)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = controller.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("READY "), line
        pgid = int(line.split()[1])
        grandchild = grandchild_of(log)
        assert len(group_members(pgid)) == 3
        controller.send_signal(signal.SIGKILL)  # no atexit, no unconfigure: only the guard's pdeathsig
        controller.wait()
        assert wait_until(lambda: group_empty(pgid))
        assert not running(grandchild)
    finally:
        if controller.poll() is None:
            controller.kill()


def test_a_fatal_log_line_fails_the_start_at_once(tmp_path: Path) -> None:
    held, port = free_port()
    script = "echo 'torch.OutOfMemoryError: CUDA out of memory'; exec sleep 99"
    spec = ServerSpec("vllm", ("sh", "-c", script), port, "agenteval-x", None, grace_s=1.0)
    with pytest.raises(LaunchError) as info:
        launch(spec, tmp_path / "server.log", timeout_s=600, held=held)  # long before the timeout
    assert str(info.value).startswith(
        "vllm server reported a fatal error before it was ready (CUDA out of memory); "
        f"log {tmp_path / 'server.log'}: # agenteval launch: "
    )
    assert not ACTIVE
