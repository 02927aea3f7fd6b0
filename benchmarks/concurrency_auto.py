"""`--concurrency auto` against a rate limit: the steady-state throughput of the adaptive
limit against a fixed `--concurrency L` (the best a user who knew the limit could do),
on the test server refusing requests past L at once with a 429 (Retry-After 0.1 s, as a
rate-limited API answers), and the time auto takes to reach its steady state.

    python benchmarks/concurrency_auto.py                      # L = 8, 32, 128 (about 100 s)
    python benchmarks/concurrency_auto.py --limits 32 --seconds 20

For each L the server runs in its own process with a latency that keeps it near 300
requests a second at most (a busy 2-core machine serves no more through Python on both
ends); the plugin's own sampler (models/backends/openai.py, with its retries and slots)
keeps 4 L requests waiting for a slot for `--seconds`, first with a fixed limit of L,
then with `auto` (starting at 4, --concurrency-max 4 L). Auto's steady state starts when
its limit enters the band it saws in (from 9/10 of L + 1 to L + 1) and stays there; its
throughput from then to the end is compared with the fixed run's over the same stretch
of its own run. One table row per L; ratios within one invocation (CONTRIBUTING.md); the
figures go in docs/reliability.md."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_agenteval.api.sampler import SamplingParams  # noqa: E402
from pytest_agenteval.models.backends.openai import OpenAISampler  # noqa: E402
from pytest_agenteval.models.http.aimd import AUTO_START, DECREASE  # noqa: E402
from pytest_agenteval.testing import start_server_process, stop_server_process  # noqa: E402

RATE = 320.0  # requests a second the latency allows at L in flight: L / latency


def latency_ms(limit: int) -> float:
    return max(50.0, 1000.0 * limit / RATE)


def server_stats(url: str) -> dict[str, Any]:
    return json.loads(urllib.request.urlopen(f"{url.removesuffix('/v1')}/stats").read())


def reset(url: str) -> None:
    base = url.removesuffix("/v1")
    urllib.request.urlopen(urllib.request.Request(f"{base}/stats/reset", method="POST")).read()


async def run(url: str, limit: int, seconds: float, adaptive: bool) -> dict[str, Any]:
    """Keep 4 L requests asking for a slot for `seconds`: the completion times (seconds
    since the start), the requests sent and auto's limit changes (seconds since the start,
    old, new, why)."""
    ceiling = 4 * limit
    start, most = (AUTO_START, ceiling) if adaptive else (None, limit)
    sampler = OpenAISampler([url], "mock-model", concurrency=most, adaptive_start=start)
    hi = [{"role": "user", "content": "hi"}]
    seeds = itertools.count()
    done: list[float] = []
    wall_start, started = time.time(), time.perf_counter()
    deadline = started + seconds

    async def client() -> None:
        while time.perf_counter() < deadline:
            await sampler.complete(hi, SamplingParams(1.0, 1.0, 0, 16, next(seeds)))
            done.append(time.perf_counter() - started)

    try:
        await asyncio.gather(*(client() for _ in range(ceiling)))
        stats = sampler.stats()
    finally:
        await sampler.aclose()
    changes = [
        (at - wall_start, old, new, why)
        for report in stats.get("concurrency", [])
        for at, old, new, why in report["changes"]
    ]
    return {"done": done, "sent": stats["requests"], "changes": changes}


def steady_from(changes: list[tuple[float, int, int, str]], limit: int, start: int) -> float | None:
    """When auto's limit entered the band [int(DECREASE (L + 1)), L + 1] for good (0.0: it
    started there; None: it never settled in it)."""
    low, high = int(DECREASE * (limit + 1)), limit + 1
    since: float | None = 0.0 if low <= start <= high else None
    for at, _, new, _ in changes:
        if low <= new <= high:
            since = at if since is None else since
        else:
            since = None
    return since


def rate(done: list[float], start: float, end: float) -> float:
    return sum(start <= t < end for t in done) / (end - start)


def measure(limit: int, seconds: float) -> dict[str, Any]:
    proc, url = start_server_process(
        "--max-concurrent", str(limit), "--latency-ms", str(latency_ms(limit)), "--retry-after", "0.1"
    )
    try:
        reset(url)
        fixed = asyncio.run(run(url, limit, seconds, adaptive=False))
        fixed_refused = server_stats(url)["rate_limit"]["refused"]
        reset(url)
        auto = asyncio.run(run(url, limit, seconds, adaptive=True))
        auto_refused = server_stats(url)["rate_limit"]["refused"]
    finally:
        stop_server_process(proc)
    steady = steady_from(auto["changes"], limit, AUTO_START)
    window = (steady if steady is not None else seconds / 2, seconds)
    fixed_rate, auto_rate = rate(fixed["done"], *window), rate(auto["done"], *window)
    cuts = [old for _, old, _, why in auto["changes"] if why not in ("slow_start", "successes")]
    return {
        "L": limit,
        "latency_ms": latency_ms(limit),
        "fixed_per_s": round(fixed_rate, 1),
        "auto_per_s": round(auto_rate, 1),
        "ratio": round(fixed_rate / auto_rate, 3) if auto_rate else None,
        "steady_after_s": None if steady is None else round(steady, 2),
        "window_s": [round(window[0], 2), window[1]],
        "auto_peak": max([AUTO_START, *(new for _, _, new, _ in auto["changes"])]),
        "auto_final": auto["changes"][-1][2] if auto["changes"] else AUTO_START,
        "auto_cuts": len(cuts),
        "auto_429": auto_refused,
        "fixed_429": fixed_refused,
        "auto_sent_per_generation": round(auto["sent"] / max(1, len(auto["done"])), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limits", type=int, nargs="+", default=[8, 32, 128], help="L: the server's limits")
    parser.add_argument("--seconds", type=float, default=0.0, help="each run's length (8 + L / 8 s)")
    args = parser.parse_args()
    rows = []
    for limit in args.limits:
        seconds = args.seconds or 8.0 + limit / 8
        row = measure(limit, seconds)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print("| L | fixed `--concurrency L` (req/s) | auto (req/s) | ratio | time to steady state |")
    print("|---|---|---|---|---|")
    for row in rows:
        steady = "never" if row["steady_after_s"] is None else f"{row['steady_after_s']:.1f} s"
        print(f"| {row['L']} | {row['fixed_per_s']} | {row['auto_per_s']} | {row['ratio']} | {steady} |")


if __name__ == "__main__":
    main()
