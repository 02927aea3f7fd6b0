"""`--serve` end to end: pytest runs a tiny AIME suite while the plugin launches a real
`python -m llama_cpp.server` on the embedded SmolLM2 gguf, with and without `-n 2`."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

from pytest_agenteval.models.serve.launcher import group_empty
from pytest_agenteval.models.serve.session import KEEP_FILE, read_state, stop_kept
from tests.conftest import interruptible, read_results

from .test_launcher import running, wait_until

FAST = ("--serve", "--max-tokens=8", "--n-ctx=1024", "--llama-threads=1")
POST = '"POST /v1/chat/completions HTTP/1.1" 200'

# Kills the launched server group (guard, server) right after the first item.
KILL_AFTER_FIRST = """
import os, signal
from pytest_agenteval.models.serve.launcher import ACTIVE

done = []

def pytest_runtest_teardown(item):
    if not done:
        done.append(item.nodeid)
        os.killpg(ACTIVE[0].pid, signal.SIGKILL)
"""


def served(summary: dict) -> dict:
    assert summary["model"]["backend"] == "openai"
    return summary["model"]["served"]


def logs(folder: Path) -> list[Path]:
    return sorted(folder.glob("server-agenteval-*.log"))


def test_serve_launches_one_server_for_the_run_and_stops_it_and_the_cache_key_is_the_model(
    run_suite, tmp_path: Path
) -> None:
    # one launch shared by three tests (merged: test_the_cache_key_is_the_model_not_the_launched_port
    # and test_two_workers_share_the_one_server, whose -n 2 run this first run is); the second
    # run, in one process, launches and stops a server of its own
    cached = (*FAST, "--val-n=2", f"--agenteval-cache-dir={tmp_path / 'cache'}")
    result, out = run_suite(*cached, "-n", "2")
    result.assert_outcomes(failed=4)  # SmolLM2 solves none: failures, not errors
    problems, (summary,) = read_results(out)
    info = served(summary)
    (replica,) = info["replicas"]
    (log,) = logs(out.parent)  # one server: the controller launched, the workers did not
    assert replica["log"] == str(log)
    assert replica["command"].split()[1:4] == ["-m", "llama_cpp.server", "--model"]
    assert replica["version"] == "0.3.36"
    assert summary["model"]["name"] == f"agenteval-{info['fingerprint'][:12]}"  # the alias requests carry
    # people read the model they gave (it read `agenteval-b179c9523d0e (openai)`)
    assert summary["model"]["display"] == "SmolLM2-135M-Instruct.Q4_1 (llama-cpp, launched)"
    result.stdout.re_match_lines([r"  model +SmolLM2-135M-Instruct\.Q4_1 \(llama-cpp, launched\)$"])
    text = log.read_text()
    assert text.count("# agenteval launch:") == 1
    assert text.count(POST) == 8  # 4 problems x N=2, both workers' requests through the one server
    assert summary["workers"] == 2
    assert all(len(p["generations"]) == 2 for p in problems)
    assert not running(replica["pid"]) and group_empty(replica["pid"])
    # The cache key is the model, not the launched port: a new server on a new port, all hits.
    again, out = run_suite(*cached, out="two.jsonl")
    again.assert_outcomes(failed=4)
    _, (summary,) = read_results(out)
    assert summary["backend"]["cache_hits"] == 8
    assert sum(log.read_text().count(POST) for log in logs(out.parent)) == 8  # all from the first run
    (own,) = served(summary)["replicas"]
    assert own["pid"] != replica["pid"] and log.read_text().count("# agenteval launch:") == 2  # its own
    assert not running(own["pid"]) and group_empty(own["pid"])  # and stopped


def test_a_bad_server_flag_is_one_start_up_line_with_the_log_tail(run_suite) -> None:
    result, out = run_suite(*FAST, "--serve-arg=--no-such-flag")
    assert result.ret == 4
    (line,) = [x for x in result.stderr.lines if x.startswith("ERROR: llama-cpp server")]
    (log,) = logs(out.parent)
    assert line.startswith(f"ERROR: llama-cpp server exited with code 2 before it was ready; log {log}: ")
    assert "unrecognized arguments: --no-such-flag" in line
    assert "Traceback" not in result.stderr.str()


def test_a_server_killed_mid_run_turns_the_remaining_items_into_errors(run_suite, aime_suite) -> None:
    aime_suite.makeconftest(KILL_AFTER_FIRST)
    # one request at a time and long generations: the kill lands while items are left
    result, out = run_suite(*FAST, "--val-n=1", "--concurrency=1", "--max-tokens=128", "--temperature=2")
    problems, (summary,) = read_results(out)
    (log,) = logs(out.parent)
    assert problems[0]["error"] is None
    for late in problems[2:]:
        assert late["error"].startswith(
            "sample 0: SamplerError: the launched server died (connection refused)"
        )
        assert late["error"].endswith(f"its log: {log}")
    assert summary["backend"]["launched_server_died"] == 1
    # no retry storm against a dead port (of --max-attempts 8): at most the one request that
    # met the connection reset while the kernel was still tearing the process down
    assert summary["backend"].get("retries", 0) <= 1
    assert summary["complete"] is False


def test_two_replicas_one_killed_the_other_serves_the_rest(run_suite, aime_suite) -> None:
    aime_suite.makeconftest(KILL_AFTER_FIRST)
    result, out = run_suite(
        *FAST, "--serve-gpus=0-1", "--val-n=2", "--concurrency=1", "--max-tokens=32", "--temperature=2"
    )
    result.assert_outcomes(failed=4)  # every item generated: none is an error
    problems, (summary,) = read_results(out)
    info = served(summary)
    assert [r["env"] for r in info["replicas"]] == [
        {"CUDA_VISIBLE_DEVICES": "0"},
        {"CUDA_VISIBLE_DEVICES": "1"},
    ]
    first, second = logs(out.parent)
    assert first.read_text().count(POST) >= 1 and second.read_text().count(POST) >= 1  # balanced
    assert first.read_text().count(POST) + second.read_text().count(POST) <= 8
    assert summary["backend"]["launched_server_died"] == 1
    assert all(p["error"] is None for p in problems)
    assert not any(running(r["pid"]) for r in info["replicas"])


def test_serve_keep_reuses_the_server_and_restarts_it_on_a_change(run_suite, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    keep = (*FAST, "--serve-keep", f"--agenteval-cache-dir={cache}", "--val-n=1", "--limit=1")
    try:
        first, out1 = run_suite(*keep, out="one.jsonl")
        (state,) = read_state(cache)
        assert running(state["pid"])  # left up on purpose
        second, out2 = run_suite(*keep, out="two.jsonl")
        assert "reusing the kept llama-cpp server(s)" in second.stderr.str()
        assert read_state(cache) == [state]
        _, (summary,) = read_results(out2)
        assert served(summary)["replicas"][0]["reused"] is True
        third, _ = run_suite(*keep, "--n-ctx=512", out="three.jsonl")  # other args: a fresh server
        (changed,) = read_state(cache)
        assert changed["pid"] != state["pid"] and changed["args_hash"] != state["args_hash"]
        assert wait_until(lambda: group_empty(state["pid"]))
        assert running(changed["pid"])
    finally:
        remaining = read_state(cache)
        assert stop_kept(cache) == []
    assert all(group_empty(e["pid"]) for e in remaining)
    assert not (cache / KEEP_FILE).exists()


CTRL_C_CONFTEST = """
import time
from pathlib import Path
from pytest_agenteval.models.serve.launcher import ACTIVE

def pytest_runtest_setup(item):
    Path("guard.pid").write_text(str(ACTIVE[0].pid))
    time.sleep(120)  # interrupted here
"""


def test_ctrl_c_leaves_no_server_behind(aime_suite, tiny_aime: Path) -> None:
    aime_suite.makeconftest(CTRL_C_CONFTEST)
    args = [
        "-p",
        "no:cacheprovider",
        f"--dataset-path={tiny_aime}",
        "--agenteval-out=out.jsonl",
        "--mode=text-only",
    ]
    process = interruptible([sys.executable, "-m", "pytest", *args, *FAST], aime_suite.path)
    pid_file = aime_suite.path / "guard.pid"
    try:
        assert wait_until(lambda: pid_file.exists() and pid_file.read_text() != "", 120)
        pgid = int(pid_file.read_text())
        assert running(pgid)
        time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 2  # pytest: interrupted
        assert group_empty(pgid)
    finally:
        if process.poll() is None:
            process.kill()
