"""What does the budget cost? The same requests through the OpenAI sampler with and
without a budget (--max-cost's ledger: a file lock, a read and a write before and after
each request), against the test server with a fixed latency, in one process and one run.

    python benchmarks/budget_overhead.py                  # 400 requests, 32 in flight, 50 ms
    python benchmarks/budget_overhead.py --requests 2000 --latency-ms 0

Prints the wall time and CPU time of each, and their ratios (budget / none)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_agenteval.models import OpenAISampler, SamplingParams  # noqa: E402
from pytest_agenteval.models.cost.budget import BudgetLedger, Limits, RunBudget  # noqa: E402
from pytest_agenteval.models.cost.prices import Price  # noqa: E402
from pytest_agenteval.testing import OpenAITestServer, ServerConfig  # noqa: E402


async def drive(url: str, requests: int, concurrency: int, budget: RunBudget | None) -> tuple[float, float]:
    sampler = OpenAISampler([url], "mock-model", concurrency=concurrency, api_key="k")
    wrapped = budget.wrap(sampler, "mock-model") if budget is not None else sampler
    messages = [{"role": "user", "content": "What is 6 x 7? " * 20}]
    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(
        *(wrapped.complete(messages, SamplingParams(0.0, 1.0, 0, 64, seed)) for seed in range(requests))
    )
    elapsed = time.perf_counter() - started, time.process_time() - cpu
    await sampler.aclose()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    args = parser.parse_args()
    with OpenAITestServer(ServerConfig(latency_ms=args.latency_ms)) as server:
        asyncio.run(drive(server.url, 32, args.concurrency, None))  # warm-up: connections, imports
        plain = asyncio.run(drive(server.url, args.requests, args.concurrency, None))
        ledger = BudgetLedger.create(Limits(max_cost_usd=1000.0))
        budget = RunBudget(ledger, {"mock-model": Price("mock-model", 1.0, 2.0)})
        try:
            budgeted = asyncio.run(drive(server.url, args.requests, args.concurrency, budget))
            state = ledger.state()
        finally:
            ledger.remove()
    assert state.requests == args.requests, state
    print(
        json.dumps(
            {
                **vars(args),
                "wall_s": {"none": round(plain[0], 3), "budget": round(budgeted[0], 3)},
                "cpu_s": {"none": round(plain[1], 3), "budget": round(budgeted[1], 3)},
                "wall_ratio": round(budgeted[0] / plain[0], 3),
                "cpu_ratio": round(budgeted[1] / plain[1], 3),
            }
        )
    )


if __name__ == "__main__":
    main()
