"""The percentile bootstrap, resampling clusters with replacement: a problem with its N
generations, an item with its judges' verdicts, a unit with its coders' values, a shared
problem with both runs' scores. A statistic can be undefined on a resample (None or NaN: a
ratio over nothing, Krippendorff's alpha without variation): such resamples are counted in
`Interval.undefined`, never dropped silently; the percentiles are those of the defined ones.

One stream of resamples: `numpy.random.default_rng(seed)` draws the cluster indices
`CHUNK` rows at a time, so every statistic computed from one (seed, clusters, iterations)
sees the same resamples, and memory stays at `CHUNK` x clusters."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import numpy as np

ITERATIONS = 2000
CONFIDENCE = 0.95
CHUNK = 100
PERCENTILE = "percentile bootstrap"

T = TypeVar("T")


@dataclass(frozen=True)
class Interval:
    """A 95 % interval (None, None: none could be computed), with the resamples on which
    the statistic was undefined out of `iterations` drawn, and how it was computed."""

    low: float | None
    high: float | None
    undefined: int = 0
    iterations: int = 0
    method: str = PERCENTILE

    def bounds(self) -> list[float] | None:
        """[low, high], the form results files carry; None without an interval."""
        return None if self.low is None or self.high is None else [self.low, self.high]


def resamples(clusters: int, iterations: int, seed: int) -> Iterator[np.ndarray]:
    """Index arrays of shape (rows, clusters), `iterations` rows in all."""
    import numpy as np  # here, not at import: numpy is 0.1 s of every process's start-up

    rng = np.random.default_rng(seed)
    for start in range(0, iterations, CHUNK):
        yield rng.integers(0, clusters, size=(min(CHUNK, iterations - start), clusters))


def percentile_interval(values: Sequence[float] | np.ndarray, confidence: float = CONFIDENCE) -> Interval:
    """The percentile interval of bootstrap replicates; NaN and infinite ones are undefined."""
    import numpy as np  # here, not at import: numpy is 0.1 s of every process's start-up

    replicates = np.asarray(values, dtype=float)
    defined = replicates[np.isfinite(replicates)]
    undefined = int(replicates.size - defined.size)
    if not defined.size:
        return Interval(None, None, undefined, int(replicates.size))
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(defined, [tail, 100 - tail])
    return Interval(round(float(low), 6), round(float(high), 6), undefined, int(replicates.size))


def cluster_bootstrap(
    clusters: Sequence[T],
    statistic: Callable[[Sequence[T]], float | None],
    seed: int,
    iterations: int = ITERATIONS,
) -> Interval:
    """Percentile interval of any statistic of a list of clusters (called once per
    resample). Fewer than two clusters: no interval (a resample is the sample itself)."""
    if len(clusters) < 2:
        return Interval(None, None)
    values = [
        _number(statistic([clusters[i] for i in row]))
        for rows in resamples(len(clusters), iterations, seed)
        for row in rows
    ]
    return percentile_interval(values)


def ratio_bootstrap(
    numerator: Sequence[float] | np.ndarray,
    denominator: Sequence[float] | np.ndarray,
    seed: int,
    iterations: int = ITERATIONS,
) -> Interval:
    """Percentile interval of sum(numerator) / sum(denominator) over resampled clusters
    (one entry each), vectorised; a resample whose denominator sums to 0 is undefined.
    A mean is the ratio over a denominator of ones."""
    import numpy as np  # here, not at import: numpy is 0.1 s of every process's start-up

    top = np.asarray(numerator, dtype=float)
    bottom = np.asarray(denominator, dtype=float)
    if top.shape != bottom.shape or top.ndim != 1:
        raise ValueError(f"numerator and denominator differ in shape: {top.shape} vs {bottom.shape}")
    if top.size == 0:
        return Interval(None, None)
    parts = []
    for rows in resamples(top.size, iterations, seed):
        sums, counts = top[rows].sum(axis=1), bottom[rows].sum(axis=1)
        parts.append(np.divide(sums, counts, out=np.full(len(rows), np.nan), where=counts != 0))
    return percentile_interval(np.concatenate(parts))


def _number(value: Any) -> float:
    return float("nan") if value is None else float(value)
