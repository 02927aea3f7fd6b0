"""Start-up: seconds from launch to the server's first request (issue 14 item 7).

    python benchmarks/startup.py --reps 5

The median (min) over --reps runs of: the bare aiohttp client, `pytest suites/aime25`
with -n 0 and -n 2, and the same with `-p no:anyio` (anyio's pytest plugin, installed by
the environment, imports trio at start-up when it is installed). The server answers at
once; the workload is small (30 problems x 1 sample), only the start matters here."""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.throughput import measure, pytest_command, write_synthetic  # noqa: E402
from pytest_agenteval.testing import start_server_process, stop_server_process  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="agenteval-startup-"))
    data, _ = write_synthetic(folder, 30, 1)
    options = argparse.Namespace(samples=1)
    process, url = start_server_process("--no-n")
    bare = [
        sys.executable,
        "benchmarks/bare_client.py",
        url,
        "--problems=30",
        "--samples=1",
        "--concurrency=32",
    ]
    runs = {
        "bare aiohttp client": bare,
        "pytest -n 0": pytest_command(url, data, options, 32, "-n", "0"),
        "pytest -n 2": pytest_command(url, data, options, 32, "-n", "2"),
        "pytest -n 0 -p no:anyio": pytest_command(url, data, options, 32, "-n", "0", "-p", "no:anyio"),
        "pytest -n 2 -p no:anyio": pytest_command(url, data, options, 32, "-n", "2", "-p", "no:anyio"),
    }
    try:
        print(f"{'run':<28}{'start s med':>12}{'min':>7}{'wall s med':>12}")
        for name, command in runs.items():
            results = [measure(url, command) for _ in range(args.reps)]
            starts = [r["startup"] for r in results]
            walls = [r["wall"] for r in results]
            print(
                f"{name:<28}{statistics.median(starts):12.3f}{min(starts):7.3f}{statistics.median(walls):12.3f}"
            )
    finally:
        stop_server_process(process)


if __name__ == "__main__":
    main()
