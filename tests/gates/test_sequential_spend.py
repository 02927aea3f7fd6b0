"""What a sequential run sends after its decision and what it says it spent: under
`--concurrency auto` the draws in flight follow the live limit (not --concurrency-max), so
the decision stops the requests within one a slot; the draws finished after the decision
are counted (requests, tokens, cost) beside those the decision used; a cost budget that
refuses the first draw is named in the gate's line and the summary is still written."""

from __future__ import annotations

import pytest

from pytest_agenteval.testing import BernoulliResponder, OpenAITestServer, ServerConfig
from tests.conftest import TINY_PROBLEMS, read_results

GATE = "aime25.average_at_n >= 0.4 @ 0.95"


def rates(*values: float) -> BernoulliResponder:
    return BernoulliResponder(
        {p["problem"]: (p["answer"], r) for p, r in zip(TINY_PROBLEMS, values, strict=True)}
    )


def run_auto(run_suite, *args):
    """A clear pass under --concurrency auto against a server that admits 2 requests at once
    (the live limit drops to 2 or so; --concurrency-max stays at 64)."""
    config = ServerConfig(script=rates(0.9, 0.8, 0.9, 0.7), max_concurrent=2, latency_ms=40)
    with OpenAITestServer(config) as server:
        result, path = run_suite(
            f"--endpoint={server.url}",
            "--val-n=64",
            "--concurrency=auto",
            "--agenteval-sequential",
            f"--agenteval-gate={GATE}",
            *args,
        )
        stats = server.stats()
    return result, path, stats


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one process", "-n 2"])
def test_under_concurrency_auto_the_decision_stops_the_requests_within_one_a_slot(run_suite, workers):
    result, path, stats = run_auto(run_suite, *workers)
    assert result.ret == 0, result.stdout.str()[-3000:]
    _, (summary,) = read_results(path)
    block = summary["sequential"]
    used, finished = block["draws_used"], block["draws_finished"]
    admitted = stats["total_requests"] - stats["rate_limit"]["refused"]  # the server generated these
    endpoints = summary["concurrency"]["endpoints"]
    # the highest live limit each process reached, summed (it starts at 4, 2 a worker with
    # -n 2; the server admits 2 at once); --concurrency-max is 64
    peak = sum(e["peak"] for e in (endpoints.values() if isinstance(endpoints, dict) else endpoints))
    assert peak <= 16
    # past the decision at most the one request each slot had in flight (before: 85 of 22)
    assert finished <= used + peak, (used, finished, peak)
    assert admitted <= used + peak, (used, admitted, peak)
