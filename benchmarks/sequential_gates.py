"""How often does a sequential gate decide wrongly, and how many draws does it save? The
betting confidence sequence of `pytest_agenteval.stats.sequential` (numpy only), simulated:

- threshold gates `mean >= t` (t = 0.4, confidence 0.95): 10,000 runs at each true mean in
  {t - 0.05, t - 0.02, t, t + 0.02, t + 0.05, t + 0.2}. A draw is one generation of a problem
  drawn uniformly at random with a fresh seed, so it is Bernoulli with the suite's mean
  Average@inf: that is what is simulated. The budget is a full run's N x 30 draws
  (N = 16 and 64); a run stops at the first draw after which the interval leaves t.
- paired gates `new >= base` over differences in [-1, 1] (both models on the same draw,
  each right independently, base at 0.4): true differences -0.05, 0, 0.02, 0.05, 0.2.
- the interval's width beside the closed-form Hoeffding normal-mixture confidence sequence
  at n = 50, 200 and 1,000: with rho tuned to each n (that sequence at its best there, which
  one sequence cannot be at every n) and with one rho tuned at 200.
- with `--confseq-src DIR` (a checkout of github.com/gostevehoward/confseq; its package
  does not install here: it builds a C++ extension against Boost), its `betting_cs` on the
  same sequences, for the largest difference of the two intervals at any time.

    python benchmarks/sequential_gates.py                 # the tables, as in docs/ci.md
    python benchmarks/sequential_gates.py --runs 2000     # quicker

A wrong decision is a PASS where the true mean is below t and a FAIL where it is at least t
(a gate `>= t` holds at t). It must be at most 1 - confidence at every mean."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_agenteval.stats.sequential import (  # noqa: E402
    BettingCS,
    first_decision,
    hoeffding_mixture_radius,
    hoeffding_rho,
)

THRESHOLD, CONFIDENCE, PROBLEMS = 0.4, 0.95, 30
SHIFTS = (-0.05, -0.02, 0.0, 0.02, 0.05, 0.2)
DIFFERENCES = (-0.05, 0.0, 0.02, 0.05, 0.2)
SAMPLES = (16, 64)
CONFSEQ_FILES = (
    "betting.py",
    "predmix.py",
    "misc.py",
    "types.py",
    "betting_strategies.py",
    "conjmix_bounded.py",
)
CHUNK = 2500  # runs simulated at once (memory: CHUNK x the longest budget)


def simulate(
    draw: Callable[..., Any], runs: int, threshold: float, budget: int, rng: np.random.Generator
) -> tuple[np.ndarray, ...]:
    """(decision side: +1 PASS, -1 FAIL, 0 undecided; draws used) of each run, the decision
    read from the capital at `threshold` (unit scale)."""
    sides, used = [], []
    for start in range(0, runs, CHUNK):
        x = draw(rng, (min(CHUNK, runs - start), budget))
        first, side = first_decision(x, threshold, 1 - CONFIDENCE)
        sides.append(side)
        used.append(np.where(first >= 0, first + 1, budget))
    return np.concatenate(sides), np.concatenate(used)


def row(label: str, holds: bool, side: np.ndarray, used: np.ndarray, budgets: dict[int, int]) -> list[str]:
    """Per budget: the share decided wrongly, the share undecided, the median draws used."""
    cells = [label]
    for budget in budgets.values():
        cut = np.where(used <= budget, side, 0)
        wrong = np.mean(cut < 0) if holds else np.mean(cut > 0)
        median = int(np.median(np.minimum(used, budget)))
        cells += [f"{wrong:.4f}", f"{np.mean(cut == 0):.4f}", f"{median:,} of {budget:,}"]
    return cells


def threshold_table(runs: int, rng: np.random.Generator) -> list[list[str]]:
    budgets = {n: n * PROBLEMS for n in SAMPLES}
    longest = max(budgets.values())
    rows = []
    for shift in SHIFTS:
        mean = THRESHOLD + shift
        side, used = simulate(
            lambda g, shape, mean=mean: (g.random(shape) < mean).astype(float), runs, THRESHOLD, longest, rng
        )
        rows.append(row(f"{mean:.2f}", mean >= THRESHOLD, side, used, budgets))
    return rows


def paired_table(runs: int, rng: np.random.Generator) -> list[list[str]]:
    budgets = {n: n * PROBLEMS for n in SAMPLES}
    longest = max(budgets.values())
    base = 0.4
    rows = []
    for difference in DIFFERENCES:

        def draw(
            g: np.random.Generator, shape: tuple[int, int], new: float = base + difference
        ) -> np.ndarray:
            d = (g.random(shape) < new).astype(float) - (g.random(shape) < base)
            return (d + 1) / 2  # [-1, 1] -> [0, 1]; the margin 0 maps to 1/2

        side, used = simulate(draw, runs, 0.5, longest, rng)
        rows.append(row(f"{difference:+.2f}", difference >= 0, side, used, budgets))
    return rows


def width_table(sequences: int, rng: np.random.Generator) -> list[list[str]]:
    alpha = 1 - CONFIDENCE
    rows = []
    at = (50, 200, 1000)
    widths = {p: {n: [] for n in at} for p in (0.4, 0.1)}
    for p in widths:
        for _ in range(sequences):
            cs = BettingCS(alpha)
            for t, x in enumerate(rng.random(max(at)) < p, 1):
                cs.add(float(x))
                if t in at:
                    widths[p][t].append(cs.interval.high - cs.interval.low)
    for n in at:
        tuned = 2 * hoeffding_mixture_radius(n, alpha, hoeffding_rho(n, alpha))
        fixed = 2 * hoeffding_mixture_radius(n, alpha, hoeffding_rho(200, alpha))
        betting = [f"{np.mean(widths[p][n]):.4f}" for p in (0.4, 0.1)]
        rows.append([f"{n:,}", f"{tuned:.4f}", f"{fixed:.4f}", *betting])
    return rows


def against_confseq(source: Path, rng: np.random.Generator) -> float:
    """The largest |ours - confseq's betting_cs| over every time of a few sequences, with the
    running intersection (confseq's own Python, read from a checkout; numpy 2 lacks float_,
    which its type hints name, and its parallel map's multiprocess is not needed)."""
    np.float_ = np.float64  # type: ignore[attr-defined]
    sys.modules.setdefault("multiprocess", types.ModuleType("multiprocess"))
    folder = Path(tempfile.mkdtemp()) / "confseq"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    for name in CONFSEQ_FILES:
        text = subprocess.run(
            ["git", "-C", str(source), "show", f"HEAD:src/confseq/{name}"], capture_output=True, text=True
        ).stdout
        (folder / name).write_text(text)
    sys.path.insert(0, str(folder.parent))
    betting_cs = importlib.import_module("confseq.betting").betting_cs
    worst = 0.0
    for p, n in ((0.4, 50), (0.1, 200), (0.7, 300), (0.5, 1000), (0.95, 400)):
        x = (rng.random(n) < p).astype(float)
        low, high = betting_cs(x, alpha=1 - CONFIDENCE, running_intersection=True)
        cs = BettingCS(1 - CONFIDENCE)
        for t, value in enumerate(x):
            cs.add(float(value))
            worst = max(worst, abs(cs.interval.low - low[t]), abs(cs.interval.high - high[t]))
    return worst


def markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join([*lines, *("| " + " | ".join(r) + " |" for r in rows)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--sequences", type=int, default=200, help="sequences averaged for the widths")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--confseq-src", type=Path, default=None, help="a git checkout of confseq")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    tail = [c for n in SAMPLES for c in (f"wrong N={n}", f"undecided N={n}", f"median draws N={n}")]
    runs = f"{args.runs:,} runs per"
    print(f"threshold gate mean >= {THRESHOLD} @ {CONFIDENCE}, {runs} mean, budget N x {PROBLEMS}")
    print(markdown(["true mean", *tail], threshold_table(args.runs, rng)))
    print(f"\npaired gate new >= base @ {CONFIDENCE} (base 0.4), {runs} difference")
    print(markdown(["true difference", *tail], paired_table(args.runs, rng)))
    print(f"\nmean width at {CONFIDENCE}, Hoeffding normal mixture vs betting ({args.sequences} sequences)")
    print(
        markdown(
            [
                "n",
                "Hoeffding mixture, rho tuned at n",
                "rho tuned at 200",
                "betting, p = 0.4",
                "betting, p = 0.1",
            ],
            width_table(args.sequences, rng),
        )
    )
    if args.confseq_src is not None:
        worst = against_confseq(args.confseq_src, rng)
        print(f"\nlargest difference from confseq's betting_cs at any time: {worst:.2e}")
    print(f"\n{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
