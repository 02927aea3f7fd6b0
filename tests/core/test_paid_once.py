"""Never the same generation twice under -n 2 (issue 14 item 2): xdist's work stealing
used to hand an item whose requests were already sent to a second worker."""

from __future__ import annotations

from collections import Counter

from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import read_results, write_jsonl

THIRTY = [{"id": i, "problem": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(30)]
RUNS = 10


def test_ten_clean_runs_under_xdist_send_exactly_one_request_per_generation(run_suite, pytester) -> None:
    data = write_jsonl(pytester.path / "thirty.jsonl", THIRTY)
    # uneven latencies make one worker run dry first and steal from the other
    config = ServerConfig(answer="\\boxed{7} (seed {seed})", latency_ms=120, jitter_ms=100)
    duplicated: list[int] = []
    with OpenAITestServer(config) as server:
        for run in range(RUNS):
            server.reset()
            result, out = run_suite(
                f"--endpoint={server.url}",
                "--val-n=4",
                "--agenteval-no-cache",
                "-n",
                "2",
                data=data,
                out=f"results-{run}.jsonl",
            )
            keys = Counter(r["key"] for r in server.requests)
            problems, (summary,) = read_results(out)
            assert summary["complete"] is True and len(problems) == 30
            assert sum(len(p["generations"]) for p in problems) == 120
            assert len(keys) == 120  # every generation was asked for...
            duplicated.append(sum(keys.values()) - len(keys))  # ...and how many of them twice
    assert duplicated == [0] * RUNS
