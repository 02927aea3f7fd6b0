"""The window of items generating ahead slides past a slow one: while pytest waits on an
item whose generations are slow (a retry chain, a stall, a long answer), the items after
it keep the engine full instead of the engine idling behind it (issue 14: under 20 %
faults the soak ran at 9 requests in flight of 64)."""

from __future__ import annotations

import json

import pytest

from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import read_results, write_jsonl

THIRTY = [{"id": i, "problem": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(30)]
SLOW = "What is 0 + 0?"  # the first item: its 4 generations answer after STALL_S


def _first_item_waits(ctx) -> str | None:
    return "stall" if SLOW in json.dumps(ctx.body.get("messages")) else None


@pytest.mark.parametrize(("workers", "concurrency"), [("0", 8), ("2", 16)])
def test_the_items_after_a_slow_one_generate_while_it_waits(
    run_suite, pytester, workers, concurrency
) -> None:
    data = write_jsonl(pytester.path / "thirty.jsonl", THIRTY)
    config = ServerConfig(
        answer="\\boxed{14}", fault_plan=_first_item_waits, stall_s=4.0, stall_then="respond", log_bodies=True
    )
    with OpenAITestServer(config) as server:
        result, out = run_suite(
            f"--endpoint={server.url}",
            "--val-n=4",
            f"--concurrency={concurrency}",
            "--idle-timeout=60",  # the slow answers are honest ones, not stalls
            "--agenteval-no-cache",
            "-n",
            workers,
            data=data,
        )
        log = server.requests
    problems, (summary,) = read_results(out)
    assert summary["complete"] is True and len(log) == 120  # one request each, no retries
    slow = [i for i, entry in enumerate(log) if SLOW in json.dumps(entry["body"]["messages"])]
    assert len(slow) == 4
    # The log is in completion order. Every other generation finished before the slow
    # ones answered; with a window that stops at the slow item, only the few items that
    # fit the engine would have (16 with -n 0, measured). With -n 2 the other worker
    # also steals what the slow one has not started: there this checks the window's
    # refill under xdist's steal lock, not the window alone.
    assert min(slow) >= 100, f"only {min(slow)} of 116 other generations finished meanwhile"
