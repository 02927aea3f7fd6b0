"""`--concurrency auto` against a rate limit: throughput of the adaptive limit, of a fixed
limit equal to the server's (the best a user who knew it could do) and of a fixed limit
too high, on the test server refusing requests past K at once with a 429 (Retry-After
0.1 s, as a rate-limited API answers).

    python benchmarks/concurrency_auto.py                  # K = 8, 400 requests, 3 rounds
    python benchmarks/concurrency_auto.py --limit 16 --requests 800 --too-high 64

The sampler (models/backends/openai.py, the plugin's own, with its retries) sends every request
at once and its slots hold them back; the server runs in its own process. Each round runs
the three settings in turn and reports, per setting, the median over the rounds of: wall
time against the ideal (rounds of K requests x latency), wall time against fixed C = K,
requests sent per generation (1.0: no 429) and the 429s. Ratios within one invocation
(CONTRIBUTING.md); the machine's figures go in docs/performance.md."""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_agenteval.api.sampler import SamplingParams  # noqa: E402
from pytest_agenteval.models.backends.openai import OpenAISampler  # noqa: E402
from pytest_agenteval.models.http.aimd import AUTO_START  # noqa: E402
from pytest_agenteval.testing import start_server_process, stop_server_process  # noqa: E402


def reset(url: str) -> None:
    base = url.removesuffix("/v1")
    urllib.request.urlopen(urllib.request.Request(f"{base}/stats/reset", method="POST")).read()


def refused(url: str) -> int:
    stats = json.loads(urllib.request.urlopen(f"{url.removesuffix('/v1')}/stats").read())
    return int(stats["rate_limit"]["refused"])


async def send_all(url: str, requests: int, concurrency: int, adaptive: bool) -> dict[str, Any]:
    sampler = OpenAISampler(
        [url], "mock-model", concurrency=concurrency, adaptive_start=AUTO_START if adaptive else None
    )
    params = [SamplingParams(1.0, 1.0, 0, 32, seed) for seed in range(requests)]
    hi = [{"role": "user", "content": "hi"}]
    started = time.perf_counter()
    try:
        done = await asyncio.gather(*(sampler.complete(hi, p) for p in params), return_exceptions=True)
        wall = time.perf_counter() - started
        stats = sampler.stats()
    finally:
        await sampler.aclose()
    (report,) = stats.get("concurrency", [{"final": concurrency}])
    return {
        "wall": wall,
        "failed": sum(isinstance(d, BaseException) for d in done),
        "sent": stats["requests"],
        "final_limit": report["final"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=8, help="K: requests the server takes at once")
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--too-high", type=int, default=0, help="the fixed C too high (default 4 K)")
    parser.add_argument("--ceiling", type=int, default=64, help="--concurrency-max of auto")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    too_high = args.too_high or 4 * args.limit
    settings = {
        "auto": (args.ceiling, True),
        f"fixed C={args.limit} (= K)": (args.limit, False),
        f"fixed C={too_high}": (too_high, False),
    }
    proc, url = start_server_process(
        "--max-concurrent", str(args.limit), "--latency-ms", str(args.latency_ms), "--retry-after", "0.1"
    )
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in settings}
    try:
        for _ in range(args.rounds):
            for name, (concurrency, adaptive) in settings.items():
                reset(url)
                result = asyncio.run(send_all(url, args.requests, concurrency, adaptive))
                result["refused"] = refused(url)
                runs[name].append(result)
    finally:
        stop_server_process(proc)
    ideal = math.ceil(args.requests / args.limit) * args.latency_ms / 1000
    fixed_k = statistics.median(r["wall"] for r in runs[f"fixed C={args.limit} (= K)"])
    report = {
        "limit_K": args.limit,
        "requests": args.requests,
        "latency_ms": args.latency_ms,
        "rounds": args.rounds,
        "ideal_s": round(ideal, 3),
    }
    for name, results in runs.items():
        wall = statistics.median(r["wall"] for r in results)
        report[name] = {
            "wall_over_ideal": round(wall / ideal, 2),
            "wall_over_fixed_K": round(wall / fixed_k, 2),
            "sent_per_generation": round(statistics.median(r["sent"] for r in results) / args.requests, 3),
            "refused_429": statistics.median(r["refused"] for r in results),
            "failed": max(r["failed"] for r in results),
            "final_limit": [r["final_limit"] for r in results],
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
