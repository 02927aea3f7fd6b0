"""Is the harness invisible? Wall time against the ideal and a bare asyncio client, with
a local OpenAI-protocol server of fixed latency that counts requests in flight.

    python benchmarks/throughput.py                      # C = 32, 8, 64; then the scale checks
    python benchmarks/throughput.py --concurrency 32 --no-scale

Per C, in one go: (a) benchmarks/bare_client.py, (b) `pytest suites/aime25 --endpoint`
text-only with -n 0 and -n 2, each streamed (SSE, the default) and with --no-stream,
(c) retool with a scripted tool call per trajectory (two requests each). The server
answers one sample per request (no `n`). Ideal = rounds of C requests x latency.
CPU and peak RSS are the harness process tree's (wait4).
Bytecode caching is on for every command (PYTHONDONTWRITEBYTECODE is dropped), as on a
normal install; with it off, every process recompiles its imports at start-up."""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_agenteval.testing import start_server_process, stop_server_process  # noqa: E402

PYTEST = [sys.executable, "-m", "pytest", "suites/aime25", "-q", "-p", "no:cacheprovider"]
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run(command: list[str]) -> dict[str, float]:
    """Wall, CPU (user+sys of the whole tree) and peak RSS of one command."""
    launched = time.time()
    started = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV
    )
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return {
        "wall": time.perf_counter() - started,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss_mb": usage.ru_maxrss / 1024,
        "rc": process.returncode,
        "launched": launched,
        "exited": time.time(),
    }


def server_stats(url: str, reset: bool = False) -> dict:
    base = url.removesuffix("/v1")
    if reset:
        urllib.request.urlopen(urllib.request.Request(f"{base}/stats/reset", method="POST")).read()
        return {}
    return json.loads(urllib.request.urlopen(f"{base}/stats").read())


def pytest_command(
    url: str, data: Path, args: argparse.Namespace, concurrency: int, *extra: str
) -> list[str]:
    out = data.parent / f"results-{concurrency}-{'-'.join(extra).strip('-')}.jsonl"
    return [
        *PYTEST,
        f"--dataset-path={data}",
        f"--endpoint={url}",
        f"--val-n={args.samples}",
        f"--concurrency={concurrency}",
        "--agenteval-no-cache",
        f"--agenteval-out={out}",
        *extra,
    ]


def measure(url: str, command: list[str]) -> dict[str, float]:
    server_stats(url, reset=True)
    result = run(command)
    stats = server_stats(url)
    return {
        **result,
        "in_flight": stats["mean_in_flight"],
        "requests": stats["total_requests"],
        "connections": stats["connections"],
        "startup": stats["first_arrival"] - result["launched"],
        "tail": result["exited"] - stats["last_response"],
    }


def row(name: str, result: dict, ideal: float, bare: float | None) -> str:
    versus = f"{result['wall'] / bare:6.2f}" if bare else "     -"
    return (
        f"{name:<26}{result['wall']:8.2f}{ideal:7.1f}{result['wall'] / ideal:7.2f}{versus}"
        f"{result['in_flight']:9.1f}{result['requests']:6d}{result['connections']:6d}{result['startup']:8.2f}{result['tail']:6.2f}"
        f"{result['cpu']:8.2f}{result['rss_mb']:8.0f}"
        f"{'' if result['rc'] in (0, 1) else '  rc=' + str(result['rc'])}"
    )


def throughput(args: argparse.Namespace, data: Path, concurrency: int) -> None:
    latency = args.latency_ms / 1000
    generations = args.problems * args.samples
    ideal = math.ceil(generations / concurrency) * latency
    print(
        f"\nC = {concurrency}, {args.problems} x {args.samples}, latency {args.latency_ms:.0f} ms, "
        f"no n (one sample per request)"
    )
    print(
        f"{'run':<26}{'wall s':>8}{'ideal':>7}{'/ideal':>7}{'/bare':>6}{'inflight':>9}{'reqs':>6}{'conns':>6}"
        f"{'start s':>8}{'tail':>6}{'cpu s':>8}{'rss MB':>8}"
    )
    process, url = start_server_process("--latency-ms", str(args.latency_ms), "--no-n")
    try:
        bare = measure(
            url,
            [
                sys.executable,
                "benchmarks/bare_client.py",
                url,
                f"--problems={args.problems}",
                f"--samples={args.samples}",
                f"--concurrency={concurrency}",
            ],
        )
        print(row("bare asyncio client", bare, ideal, None))
        for workers in ("0", "2"):  # streamed (SSE, the default) beside --no-stream
            for streaming in ((), ("--no-stream",)):
                result = measure(url, pytest_command(url, data, args, concurrency, "-n", workers, *streaming))
                name = f"pytest text-only -n {workers}{' no-stream' if streaming else ''}"
                print(row(name, result, ideal, bare["wall"]))
    finally:
        stop_server_process(process)
    process, url = start_server_process(
        "--latency-ms", str(args.latency_ms), "--no-n", "--script", "benchmarks.scripted_tool_model:MODEL"
    )
    try:
        retool_ideal = math.ceil(2 * generations / concurrency) * latency
        command = pytest_command(url, data, args, concurrency, "--mode=retool", "--tool-protocol=native")
        print(row("pytest retool -n 0 (2 req)", measure(url, command), retool_ideal, None))
    finally:
        stop_server_process(process)


def scale(args: argparse.Namespace, folder: Path) -> None:
    print(f"\nscale: synthetic suites, replayed generations (no model), {args.samples} per problem")
    print(f"{'run':<34}{'wall s':>8}{'items/s':>9}{'ctrl RSS MB':>12}{'file MB':>9}")
    for problems in (2500, 5000, 10000):
        data, replay = write_synthetic(folder, problems, args.samples)
        if problems == 10000:
            collect = run([*PYTEST, "--co", f"--dataset-path={data}", f"--model-path=replay:{replay}"])
            print(
                f"{'collect 10000 items (--co)':<34}{collect['wall']:8.2f}{10000 / collect['wall']:9.0f}"
                f"{collect['rss_mb']:12.0f}{'':>9}"
            )
        out = folder / f"results-{problems}.jsonl"
        result = run(
            [
                *PYTEST,
                f"--dataset-path={data}",
                f"--model-path=replay:{replay}",
                f"--agenteval-out={out}",
            ]
        )
        summary = json.loads(out.read_text().splitlines()[-1])
        print(
            f"{f'run {problems} x {args.samples} (-n 0)':<34}{result['wall']:8.2f}"
            f"{problems / result['wall']:9.0f}"
            f"{summary['harness']['controller_peak_rss_mb']:12.0f}{out.stat().st_size / 2**20:9.1f}"
        )
    print(f"{'write results 10000 x 12':<34}{write_results(out, folder):8.2f}")


def write_results(source: Path, folder: Path) -> float:
    """Seconds to write the final results file (problem lines + summary) of a run."""
    from pytest_agenteval.api.records import problem_from_dict
    from pytest_agenteval.output.results import ResultsFile

    lines = [json.loads(line) for line in source.read_text().splitlines()]
    records = [problem_from_dict(line, ("predicted_answer", "boxed_answer")) for line in lines[:-1]]
    started = time.perf_counter()
    ResultsFile().finalize(folder / "rewritten.jsonl", records, lines[-1:])
    return time.perf_counter() - started


def write_synthetic(folder: Path, problems: int, samples: int) -> tuple[Path, Path]:
    data, replay = folder / f"problems-{problems}.jsonl", folder / f"replay-{problems}.jsonl"
    with data.open("w") as handle:
        for i in range(problems):
            handle.write(json.dumps({"id": i, "problem": f"What is {i} + {i}?", "answer": str(2 * i)}) + "\n")
    with replay.open("w") as handle:
        for i in range(problems):
            for j in range(samples):
                answer = 2 * i if j % 3 == 0 else i
                text = f"Adding, {i} + {i} = {answer}. So \\boxed{{{answer}}}."
                handle.write(json.dumps({"problem_id": i, "sample_index": j, "text": text}) + "\n")
    return data, replay


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=30)
    parser.add_argument("--samples", type=int, default=12)
    parser.add_argument("--latency-ms", type=float, default=1000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[32, 8, 64])
    parser.add_argument("--no-scale", action="store_true")
    parser.add_argument("--scale-only", action="store_true")
    args = parser.parse_args()
    workdir = tempfile.TemporaryDirectory(prefix="agenteval-bench-")  # removed at exit
    folder = Path(workdir.name)
    data, _ = write_synthetic(folder, args.problems, args.samples)
    if not args.scale_only:
        for concurrency in args.concurrency:
            throughput(args, data, concurrency)
    if not args.no_scale:
        scale(args, folder)


if __name__ == "__main__":
    main()
