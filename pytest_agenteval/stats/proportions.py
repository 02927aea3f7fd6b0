"""Intervals for proportions. A proportion of independent trials (problems passed, items
approved) gets the Wilson score interval, which never collapses to a point at 0 % or 100 %
(a percentile bootstrap of 0 successes resamples only zeros: [0, 0]).

A proportion of trials that come in clusters (generations of one problem, pairs of one
item) gets `clustered_proportion`: the percentile cluster bootstrap (it sees the
correlation inside a cluster), widened where needed to the Wilson interval over the trials.
Clustering can only widen an interval: for problems drawn from a population the variance of
the pooled rate is Var(p_i)/m + E[p_i(1-p_i)]/(mN) >= p(1-p)/(mN), the independent-trials
variance Wilson assumes. So Wilson over trials is a floor, and it is also what is left when
the bootstrap collapses (every cluster alike: all 0, all 1, or all one rate)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_agenteval.stats.bootstrap import Interval

Z95 = 1.959963984540054  # the standard normal's 97.5 % quantile
WILSON = "wilson"
CLUSTERED = "cluster bootstrap widened to wilson"


def wilson(successes: float, total: float, z: float = Z95) -> list[float] | None:
    """Wilson score interval [low, high] for `successes` of `total` (rounded to 6
    places); None without observations. `successes` may be fractional (a tie counted half)."""
    if total <= 0:
        return None
    if not 0 <= successes <= total:
        raise ValueError(f"successes={successes} outside 0..total={total}")
    p = successes / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    return [round(max(0.0, centre - half), 6), round(min(1.0, centre + half), 6)]


def clustered_proportion(
    successes: Sequence[float], trials: Sequence[float], seed: int, iterations: int
) -> Interval:
    """95 % interval of sum(successes) / sum(trials), one entry per cluster.

    Clusters of at most one trial each are independent trials: Wilson. Otherwise the
    percentile cluster bootstrap, widened to contain the Wilson interval over all trials
    (see the module's docstring); resamples whose trials sum to 0 are counted undefined."""
    from pytest_agenteval.stats.bootstrap import Interval, ratio_bootstrap  # numpy: not at import

    floor = wilson(sum(successes), sum(trials))
    if floor is None:
        return Interval(None, None, method=WILSON)
    if all(t <= 1 for t in trials):
        return Interval(floor[0], floor[1], method=WILSON)
    boot = ratio_bootstrap(successes, trials, seed, iterations)
    if boot.low is None or boot.high is None:
        return Interval(floor[0], floor[1], boot.undefined, boot.iterations, WILSON)
    low, high = min(boot.low, floor[0]), max(boot.high, floor[1])
    return Interval(low, high, boot.undefined, boot.iterations, CLUSTERED)
