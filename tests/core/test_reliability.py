"""Never lose work: flaky servers, SIGKILL and resume, Ctrl-C, dying workers, refusals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from pytest_agenteval.tasks import registry
from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import interruptible, read_results, write_jsonl

THIRTY = [{"id": i, "problem": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(30)]
SEEDED_ANSWER = "I think \\boxed{14} (seed {seed})"


def _faults(server: OpenAITestServer) -> Counter:
    return Counter(r["outcome"] for r in server.requests if r["outcome"] != "ok")


def test_twenty_percent_faults_lose_nothing_and_retries_match_the_server_log(run_suite, pytester) -> None:
    data = write_jsonl(pytester.path / "thirty.jsonl", THIRTY)
    config = ServerConfig(
        answer=SEEDED_ANSWER,
        fault_rate=0.2,
        # every kind drawn, 20 faults in 140 attempts, at most 2 in a row for a sample: seed 7
        # drew 7 in a row for one sample, whose 7th backoff (up to 32 s, full jitter) was
        # most of the run, and an 8th fault would have been its last attempt (--max-attempts 8)
        fault_seed=287,
        retry_after="0.05",
        stall_s=3,
        fault_kinds={"429": 1, "500": 1, "reset": 1, "stall": 1, "truncated": 1},
    )
    with OpenAITestServer(config) as server:
        result, out = run_suite(
            f"--endpoint={server.url}",
            "--val-n=4",
            "--request-timeout=1",
            "--agenteval-no-cache",
            "-n",
            "2",
            data=data,
        )
        deadline = time.monotonic() + 10  # the server logs a stall when its connection closes
        while server.in_flight and time.monotonic() < deadline:
            time.sleep(0.02)
        faults = _faults(server)
    problems, (summary,) = read_results(out)
    assert summary["complete"] is True and len(problems) == 30
    assert all(len(p["generations"]) == 4 for p in problems)
    assert set(faults) == {"429", "500", "reset", "stall", "truncated"}
    backend = summary["backend"]  # the same retries, by cause, summed over both workers
    # A reset on a kept-alive socket, before any byte of the reply, looks exactly like a
    # server closing it as the request went out: the HTTP client sends that once more
    # itself, and counts it apart (samplers/_http.py).
    stale = backend.get("stale_connection_retries", 0)
    assert stale <= faults["reset"]
    assert summary["requests"]["retries"] + stale == sum(faults.values()) >= 12
    assert summary["requests"]["attempts"] == 120 + sum(faults.values()) - stale
    assert backend["retries"] + stale == sum(faults.values()) and backend["ok"] == 120
    assert backend["retry_429"] == faults["429"] and backend["retry_500"] == faults["500"]
    assert backend["retry_timeout"] == faults["stall"]
    result.assert_outcomes(passed=1, failed=29)  # every generation says 14: right only for 7 + 7


def _command(pytester: pytest.Pytester, url: str, data: Path, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        f"--dataset-path={data}",
        f"--endpoint={url}",
        "--val-n=4",
        "--mode=text-only",
        f"--agenteval-out={out}",
        f"--agenteval-cache-dir={pytester.path / 'cache'}",
        "--concurrency=2",
    ]


def _cached(pytester: pytest.Pytester) -> int:
    folder = pytester.path / "cache"
    return sum(p.read_bytes().count(b"\n") for p in folder.glob("*.jsonl")) if folder.exists() else 0


def test_sigkill_then_the_same_command_requests_only_what_never_finished(aime_suite: pytest.Pytester) -> None:
    data = write_jsonl(aime_suite.path / "thirty.jsonl", THIRTY)
    out = aime_suite.path / "results.jsonl"
    # 120 generations, 2 at a time, 100 ms each: ~6 s, so the kill lands mid-run (at ~2.4 s)
    # even when a busy machine is slow to notice the 48th cached generation
    with OpenAITestServer(ServerConfig(answer=SEEDED_ANSWER, latency_ms=100)) as server:
        command = _command(aime_suite, server.url, data, out)
        process = subprocess.Popen(
            command,
            cwd=aime_suite.path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while _cached(aime_suite) < 48 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        finished = _cached(aime_suite)
        partial = out.with_name(out.name + ".partial")
        assert 48 <= finished < 120 and partial.exists() and not out.exists()
        time.sleep(0.5)  # requests in flight at the kill finish on the server side
        first_keys = {r["key"] for r in server.requests}
        server.reset()
        server.config.latency_ms = 0  # the latency was for the kill to land mid-run
        # the same command again, in this process: only the first run needs one of its own
        aime_suite.runpytest_inprocess(*command[3:])
        second_keys = [r["key"] for r in server.requests]
    assert len(second_keys) == 120 - finished
    assert len(first_keys & set(second_keys)) <= 2  # only requests in flight at the kill
    problems, (summary,) = read_results(out)
    assert summary["complete"] is True and summary["requests"]["cached_generations"] == finished
    texts = [g["text"] for p in problems for g in p["generations"]]
    from pytest_agenteval.api.records import sample_seed

    assert texts == [
        f"I think \\boxed{{14}} (seed {sample_seed(42, i, j)})" for i in range(30) for j in range(4)
    ]


def test_ctrl_c_keeps_every_finished_item_and_lf_finishes_from_the_cache(aime_suite: pytest.Pytester) -> None:
    data = write_jsonl(aime_suite.path / "thirty.jsonl", THIRTY)
    out = aime_suite.path / "results.jsonl"
    right = {p["problem"]: f"\\boxed{{{p['answer']}}}" for p in THIRTY}  # finished items pass
    with OpenAITestServer(ServerConfig(answers=right, latency_ms=100)) as server:
        command = [c for c in _command(aime_suite, server.url, data, out) if c != "no:cacheprovider"]
        command.remove("-p")
        process = interruptible(command, aime_suite.path)
        deadline = time.monotonic() + 60
        while _cached(aime_suite) < 40 and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == pytest.ExitCode.INTERRUPTED
        time.sleep(0.5)
        problems, (summary,) = read_results(out)
        assert summary["complete"] is False and len(summary["missing"]) == 30 - len(problems) > 0
        assert all(len(p["generations"]) == 4 for p in problems)
        server.reset()
        server.config.latency_ms = 0  # the latency was for the Ctrl-C to land mid-run
        aime_suite.runpytest_inprocess(*command[3:], "--lf")  # in this process: no signal to send it
        rerun, _ = read_results(out)
    assert sorted(p["problem_id"] for p in rerun) == sorted(
        set(range(30)) - {p["problem_id"] for p in problems}
    )
    assert len(server.requests) <= 4 * len(rerun)


CRASHING_SUITE = """
import os
from pytest_agenteval.tasks.aime25 import Aime25


class Crashing(Aime25):
    def score(self, problem, rollout, settings):
        if problem.id == 2:
            os._exit(3)  # the worker dies inside this item
        return super().score(problem, rollout, settings)


agenteval_suite = Crashing()


def test_aime25(evaluation):
    evaluation.check()
"""


def test_a_dying_worker_is_an_error_of_its_item_and_fails_the_gate(
    pytester: pytest.Pytester, tiny_aime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_crash=CRASHING_SUITE)
    monkeypatch.setattr(registry, "_instances", {})  # the controller runs in this process
    with OpenAITestServer(ServerConfig(answer="\\boxed{70}")) as server:
        # the controller in this process: the worker that dies is a process of its own
        result = pytester.runpytest_inprocess(
            "-p",
            "no:cacheprovider",
            f"--dataset-path={tiny_aime}",
            f"--endpoint={server.url}",
            "--val-n=2",
            "-n",
            "2",
            "--agenteval-out=r.jsonl",
            "--agenteval-gate",
            "aime25.average_at_n >= 0.1",
        )
    outcomes = result.parseoutcomes()
    assert (  # with a gate, the unsolved items are xfailed (docs/ci.md)
        outcomes.get("passed"),
        outcomes.get("xfailed"),
        outcomes.get("errors", outcomes.get("error")),
    ) == (1, 2, 1)
    assert result.ret == 1
    problems, (summary,) = read_results(pytester.path / "r.jsonl")
    assert [p["problem_id"] for p in problems] == [0, 1, 3]
    assert summary["complete"] is False and summary["missing"] == ["test_crash.py::test_aime25[2]"]
    assert summary["incomplete"] == "0 of 4 problems errored, 1 missing"
    result.stdout.fnmatch_lines(
        [
            "*gate FAIL  aime25.average_at_n >= 0.1  (run incomplete (0 of 4 problems errored, 1 missing): "
            "gates fail closed)*"
        ]
    )


REFUSING_SUITE = """
from pytest_agenteval.tasks.aime25 import Aime25
from pytest_agenteval.models import FatalRequestError


class Refused(Aime25):
    async def rollout(self, ctx):
        if ctx.problem.id == 1:
            raise FatalRequestError("http://x/v1/chat/completions: HTTP 401: bad key")
        return await super().rollout(ctx)


agenteval_suite = Refused()


def test_aime25(evaluation):
    evaluation.check()
"""


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_refused_request_stops_the_run_with_one_line(
    pytester: pytest.Pytester, tiny_aime: Path, workers: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_refused=REFUSING_SUITE)
    monkeypatch.setattr(registry, "_instances", {})  # the run is in this process
    with OpenAITestServer(ServerConfig(answer="\\boxed{70}")) as server:
        result = pytester.runpytest_inprocess(
            "-p", "no:cacheprovider", f"--dataset-path={tiny_aime}", f"--endpoint={server.url}",
            "--val-n=1", "--agenteval-out=r.jsonl", "-n", workers,
        )  # fmt: skip
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the same with or without xdist
    result.stdout.fnmatch_lines(
        ["*the server refused a request: http://x/v1/chat/completions: HTTP 401: bad key*"]
    )
    _, (summary,) = read_results(pytester.path / "r.jsonl")
    assert summary["complete"] is False
    assert summary["errors"]["messages"]["1"].startswith("sample 0: FatalRequestError: ")
    if workers == "0":  # without xdist the run stops right there: items 2 and 3 never ran
        result.assert_outcomes(passed=1, errors=1)
        assert len(summary["missing"]) == 2
