"""The metrics every suite reports unless it says otherwise (Average@N, Pass@N, pass@k, maj@N,
their 95 % intervals, the sandbox's counts): pure functions of problem records, part of the
contract because every results file carries them under these names. An empty denominator
gives None (JSON null), never 0.0: a rate with nothing behind it is not applicable, and the
summary's `not_scored` says why (`not_applicable` renders it as `n/a (<reason>)`).

The statistics themselves (bootstrap, Wilson, pass@k) live in `pytest_agenteval.stats`, the
one layer below this one: the contract's metrics and the layers above (the baseline gate,
reports, datagen) share one implementation. `unbiased_pass_at_k` stays importable from here."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pytest_agenteval.api.records import ProblemRecord
from pytest_agenteval.stats.bootstrap import ratio_bootstrap
from pytest_agenteval.stats.pass_at_k import mean_pass_at_k
from pytest_agenteval.stats.pass_at_k import unbiased_pass_at_k as unbiased_pass_at_k
from pytest_agenteval.stats.proportions import clustered_proportion

if TYPE_CHECKING:
    import numpy as np

BOOTSTRAP_ITERATIONS = 1000


def _ratio(numerator: float, denominator: float) -> float | None:
    return float(numerator) / denominator if denominator else None


def not_applicable(summary: Mapping[str, Any]) -> str:
    """How a null metric reads in the terminal, the job summary and the report."""
    return f"n/a ({summary.get('not_scored') or 'nothing scored'})"


def shown(summary: Mapping[str, Any], name: str, digits: int = 3) -> str:
    """A summary's metric with `digits` decimals, or `n/a (<reason>)` when it is null."""
    value = summary.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return not_applicable(summary)
    return f"{value:.{digits}f}"


def average_at_n(records: Sequence[ProblemRecord]) -> float | None:
    """Correct generations / generations: the N-sample estimate of pass@1."""
    generations = sum(len(r.generations) for r in records)
    return _ratio(sum(r.num_correct for r in records), generations)


def pass_at_n(records: Sequence[ProblemRecord]) -> float | None:
    """Problems with at least one correct generation / problems."""
    return _ratio(sum(r.passed for r in records), len(records))


def format_rate(records: Sequence[ProblemRecord]) -> float | None:
    generations = sum(len(r.generations) for r in records)
    return _ratio(sum(g.score.formatted for r in records for g in r.generations), generations)


def mean_code_calls(records: Sequence[ProblemRecord]) -> float | None:
    generations = sum(len(r.generations) for r in records)
    return _ratio(sum(g.rollout.code_calls for r in records for g in r.generations), generations)


def mean_turns(records: Sequence[ProblemRecord]) -> float | None:
    generations = sum(len(r.generations) for r in records)
    return _ratio(sum(g.rollout.turns for r in records for g in r.generations), generations)


def pass_at_k_curve(records: Sequence[ProblemRecord]) -> dict[str, float]:
    """Mean unbiased pass@k over problems for every k up to the smallest N (exact, then rounded)."""
    if not records:
        return {}
    counts = [(len(r.generations), r.num_correct) for r in records]
    smallest = min(n for n, _ in counts)
    return {str(k): mean_pass_at_k(counts, k) for k in range(1, smallest + 1)}


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


def maj_at_n(records: Sequence[ProblemRecord]) -> float | None:
    return _ratio(sum(majority_correct(r) for r in records), len(records))


def _per_problem_arrays(records: Sequence[ProblemRecord]) -> dict[str, np.ndarray]:
    import numpy as np  # here, not at import: numpy is 0.1 s of every process's start-up

    return {
        "generations": np.array([len(r.generations) for r in records], dtype=np.int64),
        "correct": np.array([r.num_correct for r in records], dtype=np.int64),
        "formatted": np.array(
            [sum(g.score.formatted for g in r.generations) for r in records], dtype=np.int64
        ),
        "passed": np.array([r.passed for r in records], dtype=np.int64),
        "majority": np.array([majority_correct(r) for r in records], dtype=np.int64),
        "problems": np.ones(len(records), dtype=np.int64),
    }


# metric -> (numerator, denominator) per problem; a problem is one cluster
_RATES = {
    "average_at_n": ("correct", "generations"),
    "pass_at_n": ("passed", "problems"),
    "format_rate": ("formatted", "generations"),
    "maj_at_n": ("majority", "problems"),
}


def bootstrap_intervals(
    records: Sequence[ProblemRecord], iterations: int = BOOTSTRAP_ITERATIONS, seed: int = 0
) -> dict[str, list[float] | None]:
    """The plain percentile bootstrap of each rate, resampling problems (their N generations
    stay together); None without problems. It collapses to a point at 0 % and 100 %: the
    summary's `ci95` comes from `intervals`, which does not."""
    arrays = _per_problem_arrays(records)
    return {
        name: ratio_bootstrap(arrays[top], arrays[bottom], seed, iterations).bounds()
        for name, (top, bottom) in _RATES.items()
    }


def intervals(
    records: Sequence[ProblemRecord], iterations: int = BOOTSTRAP_ITERATIONS, seed: int = 0
) -> dict[str, dict[str, Any]]:
    """The summary's `ci95` (95 % intervals), `ci95_method` and `ci95_undefined_resamples`.

    Pass@N and maj@N are proportions of problems: Wilson. Average@N and the format rate are
    proportions of generations, clustered by problem: the percentile cluster bootstrap widened
    to Wilson over generations (`stats.proportions`: never a point at 0 % or 100 %, Wilson
    alone when every problem has one generation). Undefined resamples (none of the
    resampled problems has a generation) are counted, not dropped silently."""
    arrays = _per_problem_arrays(records)
    found = {
        name: clustered_proportion(arrays[top].tolist(), arrays[bottom].tolist(), seed, iterations)
        for name, (top, bottom) in _RATES.items()
    }
    return {
        "ci95": {name: interval.bounds() for name, interval in found.items()},
        "ci95_method": {name: interval.method for name, interval in found.items()},
        "ci95_undefined_resamples": {name: interval.undefined for name, interval in found.items()},
    }


def accuracy_intervals(
    successes: Sequence[float], trials: Sequence[float], seed: int = 0, iterations: int = BOOTSTRAP_ITERATIONS
) -> dict[str, dict[str, Any]]:
    """`ci95`, `ci95_method` and `ci95_undefined_resamples` of an `accuracy` (BFCL, GAIA):
    one entry per problem, its correct generations of its scored ones. As Average@N: Wilson
    when every problem has at most one, else the cluster bootstrap widened to Wilson."""
    interval = clustered_proportion(list(successes), list(trials), seed, iterations)
    return {
        "ci95": {"accuracy": interval.bounds()},
        "ci95_method": {"accuracy": interval.method},
        "ci95_undefined_resamples": {"accuracy": interval.undefined},
    }


def _percentile(sorted_values: Sequence[float], q: float) -> float | None:
    import numpy as np  # here, not at import: numpy is 0.1 s of every process's start-up

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
    """The design documents' summary fields under the ReTool lab's names, plus pass@k, maj@N and
    the intervals (`intervals`)."""
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
        **intervals(records, seed=bootstrap_seed),
        "sandbox": sandbox_stats(records),
    }
