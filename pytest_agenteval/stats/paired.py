"""Paired comparison of two runs over the problems both scored: a percentile bootstrap that
resamples the shared problems with both runs' scores kept together (the baseline gate and
`pytest-agenteval report`). Scores come in as plain mappings, problem id -> fraction correct,
so this stays numeric; turning records or results lines into them is the caller's."""

from __future__ import annotations

from collections.abc import Mapping

ITERATIONS = 2000
# A suite's headline metric, the one a paired comparison is about; others: average_at_n.
# Here because the two readers (output/compare.py, report/analysis.py) share no other layer.
HEADLINE = {"bfcl": "accuracy", "gaia": "accuracy"}
# Fewer shared problems than this and a paired comparison decides nothing: the bootstrap of
# a handful of problems has too few distinct resamples to be a 95% interval (2 problems that
# both dropped give [-1, -1], which reads as certain), and even an exact sign test needs 6
# problems, all moving one way, to reach 5% two-sided. 10 leaves room for some that tie.
MIN_PAIRED = 10


def too_few(shared: int) -> str | None:
    """The verdict of a comparison over `shared` paired problems that cannot decide, else None."""
    if 0 < shared < MIN_PAIRED:
        return f"too few problems to decide ({shared} paired; need >= {MIN_PAIRED})"
    return None


def paired_bootstrap(
    baseline: Mapping[str, float], current: Mapping[str, float], iterations: int = ITERATIONS, seed: int = 0
) -> tuple[int, float, float, tuple[float, float]]:
    """(shared problems, baseline mean, current mean, 95% interval of current - baseline),
    resampling the shared problems with both runs' scores kept together. The mean of the
    differences is defined on every resample (no resample is empty)."""
    import numpy as np  # here, not at import: numpy is 0.1 s of every run's start-up

    from pytest_agenteval.stats.bootstrap import ratio_bootstrap

    shared = sorted(set(baseline) & set(current))
    if not shared:
        return 0, 0.0, 0.0, (0.0, 0.0)
    old = np.array([baseline[p] for p in shared], dtype=float)
    new = np.array([current[p] for p in shared], dtype=float)
    interval = ratio_bootstrap(new - old, np.ones(len(shared)), seed, iterations)
    low, high = interval.low or 0.0, interval.high or 0.0  # never None: a mean over >= 1 problem
    return len(shared), float(old.mean()), float(new.mean()), (low, high)
