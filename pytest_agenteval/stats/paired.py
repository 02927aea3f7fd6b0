"""Paired comparison of two runs over the problems both scored: a bootstrap that resamples
the shared problems with both runs' scores kept together."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_agenteval.api.records import ProblemRecord

ITERATIONS = 2000
HEADLINE = {"bfcl": "accuracy", "gaia": "accuracy"}  # a suite's headline metric; others: average_at_n


def problem_scores(records: Sequence[ProblemRecord]) -> dict[str, float]:
    return {str(r.problem_id): r.num_correct / len(r.generations) for r in records if r.complete}


def paired_bootstrap(
    baseline: Mapping[str, float], current: Mapping[str, float], iterations: int = ITERATIONS, seed: int = 0
) -> tuple[int, float, float, tuple[float, float]]:
    """(shared problems, baseline mean, current mean, 95% interval of current - baseline),
    resampling the shared problems with both runs' scores kept together."""
    import numpy as np  # here, not at import: numpy is 0.1 s of every run's start-up

    shared = sorted(set(baseline) & set(current))
    if not shared:
        return 0, 0.0, 0.0, (0.0, 0.0)
    old = np.array([baseline[p] for p in shared])
    new = np.array([current[p] for p in shared])
    picks = np.random.default_rng(seed).integers(0, len(shared), size=(iterations, len(shared)))
    diffs = (new[picks] - old[picks]).mean(axis=1)
    low, high = np.percentile(diffs, [2.5, 97.5])
    return len(shared), float(old.mean()), float(new.mean()), (round(float(low), 6), round(float(high), 6))
