"""The metrics every suite reports unless it says otherwise (Average@N, Pass@N, pass@k, maj@N,
bootstrap intervals, the sandbox's counts): pure functions of problem records, part of the
contract because every results file carries them under these names. Empty denominators give 0.0."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from math import comb
from typing import Any

import numpy as np

from pytest_agenteval.api.records import ProblemRecord

BOOTSTRAP_ITERATIONS = 1000


def _ratio(numerator: float, denominator: float) -> float:
    return float(numerator) / denominator if denominator else 0.0


def average_at_n(records: Sequence[ProblemRecord]) -> float:
    """Correct generations / generations: the N-sample estimate of pass@1."""
    generations = sum(len(r.generations) for r in records)
    return _ratio(sum(r.num_correct for r in records), generations)


def pass_at_n(records: Sequence[ProblemRecord]) -> float:
    """Problems with at least one correct generation / problems."""
    return _ratio(sum(r.passed for r in records), len(records))


def format_rate(records: Sequence[ProblemRecord]) -> float:
    generations = sum(len(r.generations) for r in records)
    return _ratio(sum(g.score.formatted for r in records for g in r.generations), generations)


def mean_code_calls(records: Sequence[ProblemRecord]) -> float:
    generations = sum(len(r.generations) for r in records)
    return _ratio(sum(g.rollout.code_calls for r in records for g in r.generations), generations)


def mean_turns(records: Sequence[ProblemRecord]) -> float:
    generations = sum(len(r.generations) for r in records)
    return _ratio(sum(g.rollout.turns for r in records for g in r.generations), generations)


def unbiased_pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al. (2021): 1 - C(n-c, k) / C(n, k), the chance that k of n samples drawn
    without replacement contain a correct one."""
    if k > n:
        raise ValueError(f"k={k} exceeds n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_at_k_curve(records: Sequence[ProblemRecord]) -> dict[str, float]:
    """Mean unbiased pass@k over problems for every k up to the smallest N."""
    if not records:
        return {}
    smallest = min(len(r.generations) for r in records)
    return {
        str(k): sum(unbiased_pass_at_k(len(r.generations), r.num_correct, k) for r in records) / len(records)
        for k in range(1, smallest + 1)
    }


def majority_answer(record: ProblemRecord) -> Any:
    """Most frequent non-null normalised answer; ties go to the answer seen first."""
    answers = [g.score.answer for g in record.generations if g.score.answer is not None]
    if not answers:
        return None
    counts = Counter(answers)
    best = max(counts.values())
    return next(a for a in answers if counts[a] == best)


def majority_correct(record: ProblemRecord) -> bool:
    """Whether the majority answer is one the scorer judged correct."""
    winner = majority_answer(record)
    if winner is None:
        return False
    return any(g.score.correct for g in record.generations if g.score.answer == winner)


def maj_at_n(records: Sequence[ProblemRecord]) -> float:
    return _ratio(sum(majority_correct(r) for r in records), len(records))


def _per_problem_arrays(records: Sequence[ProblemRecord]) -> dict[str, np.ndarray]:
    return {
        "generations": np.array([len(r.generations) for r in records], dtype=np.int64),
        "correct": np.array([r.num_correct for r in records], dtype=np.int64),
        "formatted": np.array(
            [sum(g.score.formatted for g in r.generations) for r in records], dtype=np.int64
        ),
        "passed": np.array([r.passed for r in records], dtype=np.int64),
        "majority": np.array([majority_correct(r) for r in records], dtype=np.int64),
    }


_BOOTSTRAPPED: dict[str, Callable[[dict[str, np.ndarray]], np.ndarray]] = {
    "average_at_n": lambda s: s["correct"] / np.maximum(s["generations"], 1),
    "pass_at_n": lambda s: s["passed"] / np.maximum(s["problems"], 1),
    "format_rate": lambda s: s["formatted"] / np.maximum(s["generations"], 1),
    "maj_at_n": lambda s: s["majority"] / np.maximum(s["problems"], 1),
}


def bootstrap_intervals(
    records: Sequence[ProblemRecord], iterations: int = BOOTSTRAP_ITERATIONS, seed: int = 0
) -> dict[str, list[float]]:
    """Percentile 95% intervals, resampling problems (their N generations stay together)."""
    if not records:
        return {name: [0.0, 0.0] for name in _BOOTSTRAPPED}
    arrays = _per_problem_arrays(records)
    rng = np.random.default_rng(seed)
    problems = len(records)
    sums: dict[str, list[np.ndarray]] = {key: [] for key in arrays}
    for start in range(0, iterations, 100):  # chunks bound memory at 100 x problems
        count = min(100, iterations - start)
        picks = rng.integers(0, problems, size=(count, problems))
        for key, values in arrays.items():
            sums[key].append(values[picks].sum(axis=1))
    totals = {key: np.concatenate(parts) for key, parts in sums.items()}
    totals["problems"] = np.full(iterations, problems)
    return {
        name: [round(float(q), 6) for q in np.percentile(fn(totals), [2.5, 97.5])]
        for name, fn in _BOOTSTRAPPED.items()
    }


def _percentile(sorted_values: Sequence[float], q: float) -> float | None:
    if not sorted_values:
        return None
    return float(np.percentile(np.asarray(sorted_values), q))


def sandbox_stats(records: Sequence[ProblemRecord]) -> dict[str, Any]:
    """Code calls of the run, from the transcripts: counts, rates, latency percentiles
    (calls served from the cache excluded from latency), and the containment levels."""
    calls = [
        entry
        for r in records
        for g in r.generations
        for entry in g.rollout.transcript or ()
        if entry.get("role") == "tool"
    ]
    counts = Counter(entry["status"] for entry in calls)
    latencies = sorted(1000 * e["latency_s"] for e in calls if not e.get("cached"))
    return {
        "calls": len(calls),
        "ok": counts["ok"],
        "error": counts["error"] + counts["killed"],
        "timeout": counts["timeout"],
        "sandbox_error": counts["sandbox_error"],
        "success_rate": _ratio(counts["ok"], len(calls)),
        "error_rate": _ratio(counts["error"] + counts["killed"], len(calls)),
        "timeout_rate": _ratio(counts["timeout"], len(calls)),
        "latency_ms": {f"p{q}": _percentile(latencies, q) for q in (50, 95, 99)},
        "containment": sorted({e.get("containment", "unknown") for e in calls}),
    }


def summarize_math(records: Sequence[ProblemRecord], bootstrap_seed: int = 0) -> dict[str, Any]:
    """The design documents' summary fields under the ReTool lab's names, plus pass@k, maj@N and CIs."""
    return {
        "problems": len(records),
        "generations": sum(len(r.generations) for r in records),
        "average_at_n": average_at_n(records),
        "pass_at_n": pass_at_n(records),
        "format_rate": format_rate(records),
        "mean_code_calls": mean_code_calls(records),
        "mean_turns": mean_turns(records),
        "correct_generations": sum(r.num_correct for r in records),
        "passed_problems": sum(r.passed for r in records),
        "maj_at_n": maj_at_n(records),
        "pass_at_k": pass_at_k_curve(records),
        "ci95": bootstrap_intervals(records, seed=bootstrap_seed),
        "sandbox": sandbox_stats(records),
    }
