"""Soak: a long -n 2 run against the test server with 20 % mixed faults (issue 14 item 6).

    python benchmarks/soak.py                         # 2,000 problems x 12 samples
    python benchmarks/soak.py --problems 200 --samples 4

The server fails 20 % of attempts with 429 (Retry-After), 500, a connection reset, a
silent stall (no byte; caught by --idle-timeout) and a truncated body, equally mixed.
Reported: whether every generation completed, the server's request count against
generations + retries (the plugin's own account), the controller's RSS sampled every
0.5 s while items finish (flat = the last quarter's median close to the first's; start-up
before the first finished item and the final write are left out of the quarters, and
shown as `start_up_median`, `peak` and a profile of the run in tenths), and wall time
against the ideal (rounds of C requests x latency, faults ignored). The peer for memory: plain
pytest running as many failing items with -n 2 (its terminal reporter keeps every report
to the end, so any long run grows): `controller_growth_over_plain_pytest` is the
plugin's growth over pytest's own."""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.throughput import ENV, PYTEST, server_stats  # noqa: E402
from pytest_agenteval.testing import start_server_process, stop_server_process  # noqa: E402

FAULTS = "429,500,reset,stall,truncated"


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _phase(partial: Path, out: Path, samples: dict[str, list[float]]) -> str:
    """start: no item finished yet; run: items stream to the partial file; end: the final
    file is being written (or is there)."""
    if out.exists():
        return "end"
    try:
        if partial.stat().st_size > 0:
            return "run"
    except OSError:
        pass
    return "end" if samples["run"] else "start"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=2000)
    parser.add_argument("--samples", type=int, default=12)
    parser.add_argument("--latency-ms", type=float, default=50)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--fault-rate", type=float, default=0.2)
    parser.add_argument("--idle-timeout", type=float, default=1.0)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="agenteval-soak-"))
    data, out = folder / "problems.jsonl", folder / "results.jsonl"
    with data.open("w") as handle:
        for i in range(args.problems):
            handle.write(json.dumps({"id": i, "problem": f"What is {i} + {i}?", "answer": str(2 * i)}) + "\n")
    server, url = start_server_process(
        "--latency-ms",
        str(args.latency_ms),
        "--no-n",
        "--fault-rate",
        str(args.fault_rate),
        "--fault-kinds",
        FAULTS,
        "--fault-seed",
        "11",
        "--retry-after",
        "0.2",
        "--stall-s",
        "120",
        "--answer",
        "So \\boxed{7} (seed {seed}).",
    )
    command = [
        *PYTEST,
        "-n",
        "2",
        f"--dataset-path={data}",
        f"--endpoint={url}",
        f"--val-n={args.samples}",
        "--mode=text-only",
        f"--concurrency={args.concurrency}",
        f"--idle-timeout={args.idle_timeout}",
        "--agenteval-no-cache",
        f"--agenteval-out={out}",
        "--agenteval-progress=off",
    ]
    try:
        started = time.perf_counter()
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV
        )
        partial = out.with_name(out.name + ".partial")
        samples: dict[str, list[float]] = {"start": [], "run": [], "end": []}
        while process.poll() is None:
            phase = _phase(partial, out, samples)
            value = rss_mb(process.pid)
            if value is not None:
                samples[phase].append(value)
            time.sleep(0.5)
        wall = time.perf_counter() - started
        time.sleep(1.0)  # the server logs a stall when its connection closes
        stats = server_stats(url)
    finally:
        stop_server_process(server)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    problems = [x for x in lines if x["type"] == "problem"]
    (summary,) = [x for x in lines if x["type"] == "summary"]
    generations = sum(len(p["generations"]) for p in problems)
    retries = summary["backend"].get("retries", 0)
    ideal = math.ceil(args.problems * args.samples / args.concurrency) * args.latency_ms / 1000
    run = samples["run"] or samples["start"]
    quarter = max(1, len(run) // 4)
    first, last = statistics.median(run[:quarter]), statistics.median(run[-quarter:])
    tenth = max(1, len(run) // 10)
    profile = [round(statistics.median(run[i : i + tenth]), 1) for i in range(0, len(run), tenth)]
    everything = samples["start"] + run + samples["end"]
    report = {
        "problems": args.problems,
        "samples": args.samples,
        "generations": generations,
        "expected": args.problems * args.samples,
        "complete": summary["complete"],
        "server_requests": stats["total_requests"],
        "generations_plus_retries": generations + retries,
        "retries": retries,
        "server_outcomes": stats["outcomes"],
        "server_mean_in_flight": round(stats["mean_in_flight"], 1),  # against --concurrency
        "stalls": summary.get("stalls", {}),
        "backend": summary["backend"],
        "controller_rss_mb": {
            "first_quarter_median": round(first, 1),
            "last_quarter_median": round(last, 1),
            "max": round(max(everything), 1),  # sampled
            "peak": summary["harness"]["controller_peak_rss_mb"],  # getrusage, when summarised
            "start_up_median": round(statistics.median(samples["start"]), 1) if samples["start"] else None,
            "profile": profile,
            "samples": len(run),
        },
        "wall_s": round(wall, 1),
        "ideal_s": round(ideal, 1),
        "wall_over_ideal": round(wall / ideal, 2),
        "rc": process.returncode,
    }
    report["plain_pytest_rss_mb"] = plain_pytest_growth(folder, args.problems)
    ours = last - first
    plain = report["plain_pytest_rss_mb"]["growth"]
    report["controller_growth_over_plain_pytest"] = round(ours / plain, 2) if plain > 0 else None
    print(json.dumps(report, indent=1))


PLAIN = """import pytest

@pytest.mark.parametrize("i", range({n}))
def test_problem(i):
    assert i < 0, f"0/12 correct; expected {{2 * i}}, got 7"
"""


def plain_pytest_growth(folder: Path, items: int) -> dict[str, float]:
    """The peer: what pytest's controller keeps for the same number of failing items
    without the plugin (its terminal reporter holds every report to the end), -n 2,
    RSS sampled every 0.05 s, the first and last 5 % (start-up, exit) left out."""
    test = folder / "plain" / "test_plain.py"
    test.parent.mkdir()
    test.write_text(PLAIN.format(n=items))
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", str(test)],
        cwd=test.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=ENV,
    )
    samples = []
    while process.poll() is None:
        value = rss_mb(process.pid)
        if value is not None:
            samples.append(value)
        time.sleep(0.05)
    cut = len(samples) // 20
    run = samples[cut : len(samples) - cut] or samples
    quarter = max(1, len(run) // 4)
    first, last = statistics.median(run[:quarter]), statistics.median(run[-quarter:])
    return {
        "first_quarter_median": round(first, 1),
        "last_quarter_median": round(last, 1),
        "growth": round(last - first, 1),
        "samples": len(run),
    }


if __name__ == "__main__":
    main()
