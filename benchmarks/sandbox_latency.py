"""Per-call latency of the sandbox: a fresh interpreter per call vs the preloaded zygote.

    python benchmarks/sandbox_latency.py [--n 50]

Modes run interleaved (one call of each mode per round) so machine load hits
them alike. "fresh" is `python -I -B -c` per call with the same rlimits, new
session, minimal environment and scratch directory; "zygote/<level>" is
Sandbox.run_sync with everything that level has on this machine.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_agenteval.sandbox import Sandbox, SandboxConfig  # noqa: E402

SNIPPETS = {
    "print(1+1)": "print(1+1)",
    "sympy factorint": "import sympy; print(sympy.factorint(2**64-1))",
}
_LIMITS = (
    "import resource as r\n"
    "for k, v in ((r.RLIMIT_CPU, 31), (r.RLIMIT_AS, 2 << 30), (r.RLIMIT_FSIZE, 32 << 20),"
    " (r.RLIMIT_NOFILE, 256), (r.RLIMIT_CORE, 0), (r.RLIMIT_NPROC, 64)):\n"
    "    r.setrlimit(k, (v, v))\n"
)


def fresh_call(code: str) -> float:
    """One `python -I -B -c` run with tier-0 containment; returns seconds."""
    scratch = tempfile.mkdtemp(prefix="bench-fresh-")
    env = {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": scratch,
        "TMPDIR": scratch,
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    start = time.perf_counter()
    with (
        open(os.path.join(scratch, "out"), "wb") as out,
        open(os.path.join(scratch, "err"), "wb") as err,
    ):
        proc = subprocess.run(
            [sys.executable, "-I", "-B", "-c", _LIMITS + code],
            cwd=scratch,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
            timeout=60,
        )
    elapsed = time.perf_counter() - start
    shutil.rmtree(scratch, ignore_errors=True)
    if proc.returncode != 0:
        raise RuntimeError(f"fresh interpreter failed on {code!r}")
    return elapsed


def zygote_call(sandbox: Sandbox, code: str) -> float:
    start = time.perf_counter()
    result = sandbox.run_sync(code)
    elapsed = time.perf_counter() - start
    if result.status != "ok":
        raise RuntimeError(f"sandbox failed on {code!r}: {result.output}")
    return elapsed


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50, help="calls per mode and snippet")
    args = parser.parse_args()
    sandboxes = {level: Sandbox(SandboxConfig(level=level)) for level in ("auto", "basic")}
    for level, sandbox in sandboxes.items():
        zygote_call(sandbox, "pass")  # startup is not a per-call cost
        print(f"zygote/{level}: {sandbox.containment['level']} {'+'.join(sandbox.containment['layers'])}")
    times: dict[tuple[str, str], list[float]] = {}
    try:
        for _ in range(args.n):
            for name, code in SNIPPETS.items():
                times.setdefault(("fresh", name), []).append(fresh_call(code))
                for level, sandbox in sandboxes.items():
                    key = (f"zygote/{level}", name)
                    times.setdefault(key, []).append(zygote_call(sandbox, code))
    finally:
        for sandbox in sandboxes.values():
            sandbox.close()
    print(f"\nload average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs, n={args.n}\n")
    print(f"{'mode':<16} {'snippet':<17} {'median ms':>10} {'p95 ms':>8} {'fresh/this':>11}")
    for (mode, name), values in times.items():
        med = statistics.median(values) * 1000
        fresh = statistics.median(times[("fresh", name)]) * 1000
        print(f"{mode:<16} {name:<17} {med:>10.1f} {p95(values) * 1000:>8.1f} {fresh / med:>10.1f}x")


if __name__ == "__main__":
    main()
