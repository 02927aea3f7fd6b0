"""Endpoint health (issue 14 item 3): a failing or dead endpoint among several leaves
the rotation and its work goes to the others; when every endpoint is down past the
retry budget, the remaining items are errors at once, not after full backoff each."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter

from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import read_results, write_jsonl

THIRTY = [{"id": i, "problem": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(30)]
ANSWER = "\\boxed{14} (seed {seed})"
ALWAYS_500 = {"fault_rate": 1.0, "fault_kinds": {"500": 1}}
TRIP = 14  # failures of the last 20 that take an endpoint out (samplers/_health.py)


def test_an_endpoint_answering_500_leaves_the_rotation_and_the_other_does_the_work(
    run_suite, pytester
) -> None:
    data = write_jsonl(pytester.path / "thirty.jsonl", THIRTY)
    with (
        OpenAITestServer(ServerConfig(answer=ANSWER, latency_ms=50)) as good,
        OpenAITestServer(ServerConfig(answer=ANSWER, **ALWAYS_500)) as bad,
    ):
        result, out = run_suite(
            f"--endpoint={good.url}",
            f"--endpoint={bad.url}",
            "--val-n=4",
            "--agenteval-no-cache",
            "-n",
            "2",
            data=data,
        )
        good_log, bad_log = good.requests, bad.requests
    problems, (summary,) = read_results(out)
    assert summary["complete"] is True and sum(len(p["generations"]) for p in problems) == 120
    assert Counter(r["outcome"] for r in good_log) == {"ok": 120}
    assert {r["outcome"] for r in bad_log} == {"500"}
    backend = summary["backend"]
    assert backend["circuit_opened"] >= 2  # once in each worker
    # out of the rotation after TRIP failures per worker; afterwards only half-open probes
    assert len(bad_log) <= 2 * TRIP + backend.get("circuit_probes", 0) + 2 * 32
    assert backend["retries"] == len(bad_log) == backend["retry_500"]  # each failure retried once, elsewhere
    assert summary["requests"]["attempts"] == 120 + len(bad_log)
    result.assert_outcomes(passed=1, failed=29)


def test_an_endpoint_killed_mid_run_hands_its_in_flight_work_to_the_other(aime_suite, pytester) -> None:
    data = write_jsonl(pytester.path / "thirty.jsonl", THIRTY)
    out = pytester.path / "results.jsonl"
    # 100 ms a reply: 120 generations, 4 at a time on each endpoint, take ~1.5 s; the kill
    # waits for the doomed one's 8th answer and a request in flight there, whatever the pace
    good = OpenAITestServer(ServerConfig(answer=ANSWER, latency_ms=100)).start()
    doomed = OpenAITestServer(ServerConfig(answer=ANSWER, latency_ms=100, shutdown_timeout=0.0)).start()
    try:
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            f"--dataset-path={data}",
            f"--endpoint={good.url}",
            f"--endpoint={doomed.url}",
            "--val-n=4",
            "--mode=text-only",
            "--concurrency=4",
            "--agenteval-no-cache",
            f"--agenteval-out={out}",
        ]
        process = subprocess.Popen(
            command, cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 60
        # Kill it only with work in flight there: between two of its requests the kill
        # would cut nothing, and the test would prove nothing (that raced in CI once).
        while time.monotonic() < deadline and not (
            sum(r["outcome"] == "ok" for r in doomed.requests) >= 8 and doomed.in_flight >= 1
        ):
            time.sleep(0.005)
        doomed.close()  # requests in flight there are cut; its port refuses from now on
        good.config.latency_ms = 0  # the pace was for the kill to land mid-run: the rest at once
        output = process.communicate(timeout=120)[0].decode()
        doomed_ok = {r["key"] for r in doomed.requests if r["outcome"] == "ok"}
        cut = [r for r in doomed.requests if r["outcome"] != "ok"]
        good_ok = {r["key"] for r in good.requests if r["outcome"] == "ok"}
    finally:
        good.close()
        doomed.close()
    problems, (summary,) = read_results(out)
    assert summary["complete"] is True, output
    assert sum(len(p["generations"]) for p in problems) == 120
    assert len(doomed_ok) >= 8 and len(cut) >= 1  # it was killed with work in flight...
    assert len(good_ok | doomed_ok) == 120 and not good_ok & doomed_ok  # ...which the other finished
    assert summary["backend"]["retry_connection"] >= len(cut)


def test_every_endpoint_down_past_the_retry_budget_makes_the_rest_errors_at_once(run_suite, pytester) -> None:
    data = write_jsonl(pytester.path / "thirty.jsonl", THIRTY)
    with (
        OpenAITestServer(ServerConfig(**ALWAYS_500)) as first,
        OpenAITestServer(ServerConfig(**ALWAYS_500)) as second,
    ):
        result, out = run_suite(
            f"--endpoint={first.url}",
            f"--endpoint={second.url}",
            "--val-n=4",
            "--agenteval-no-cache",
            "--retry-max-seconds=1",
            "--max-attempts=8",
            data=data,
        )
        sent = len(first.requests) + len(second.requests)
    problems, (summary,) = read_results(out)
    result.assert_outcomes(errors=30)
    assert summary["complete"] is False and summary["errors"]["items"] == 30
    messages = summary["errors"]["messages"]
    down = [m for m in messages.values() if "every endpoint is down" in m and "--retry-max-seconds" in m]
    assert len(down) >= 25  # all but the first items, which ran out of their own budget
    # without the breaker each of the 120 generations would try up to 8 times
    assert sent < 120
    assert "every endpoint is down" in result.stdout.str()
