"""Anytime-valid confidence sequences for a bounded mean: intervals that hold at every
number of draws at once, so a gate may look after each draw and stop when the interval has
left its threshold, with the stated confidence intact (no "peeking" penalty to pay).

- `BettingCS`: betting with hedged capital and predictable plug-in bets (Waudby-Smith and
  Ramdas, "Estimating means of bounded random variables by betting", JRSS-B 2024, Theorem 3
  with the PrPl bets of their eq. (26)), the choice their paper recommends and `confseq`'s
  `betting_cs` defaults (theta 1/2, bets truncated at 1/2 / m and 1/2 / (1 - m), a grid of
  1,000 breaks, the running intersection). For draws in [0, 1]; `bounds=(-1, 1)` maps a
  paired difference into [0, 1] and back.
- `hedged_log_capital`: the same capital at one candidate mean, vectorised over many
  sequences (a gate's decision needs only the capital at its threshold: the simulation).
- `hoeffding_mixture_radius`: the closed-form two-sided normal-mixture confidence sequence
  under Hoeffding's sub-Gaussian bound (Howard, Ramdas, McAuliffe and Sekhon, Ann. Statist.
  2021, eq. (14)), for comparison: it does not adapt to the variance, betting does.

The betting capital at a candidate mean m is a nonnegative martingale when m is the true
mean (each draw's conditional mean), so by Ville's inequality it ever reaches 1 / alpha with
probability at most alpha: the set of m it never rejects covers the mean at every time."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

PASS, FAIL, UNDECIDED = "PASS", "FAIL", "UNDECIDED"
BREAKS = 1000  # grid of candidate means, as confseq's betting_cs
TRUNCATION = 0.5  # c: a bet stakes at most c / m (c / (1 - m)) of the capital
PRIOR_MEAN, PRIOR_VARIANCE = 0.5, 0.25  # one fake observation regularises the plug-in


def _np() -> Any:
    import numpy as np  # here, not at import: numpy is 0.1 s of every run's start-up

    return np


def predictable_bets(x: Any, alpha: float) -> Any:
    """The PrPl bets lambda_t = sqrt(2 log(2 / alpha) / (sigma2_{t-1} t log(1 + t))) before
    truncation, along the last axis of x (draws in [0, 1]); sigma2 is the regularised running
    variance around the regularised running mean, so lambda_t uses draws before t only."""
    np = _np()
    x = np.asarray(x, dtype=float)
    t = np.arange(1, x.shape[-1] + 1, dtype=float)
    mean = (PRIOR_MEAN + np.cumsum(x, axis=-1)) / (t + 1)
    variance = (PRIOR_VARIANCE + np.cumsum((x - mean) ** 2, axis=-1)) / (t + 1)
    before = np.concatenate([np.full(x.shape[:-1] + (1,), PRIOR_VARIANCE), variance[..., :-1]], axis=-1)
    return np.sqrt(2 * math.log(2 / alpha) / (before * t * np.log1p(t)))


def hedged_log_capital(x: Any, m: float, alpha: float) -> tuple[Any, Any]:
    """(log of theta K+, log of (1 - theta) K-) at candidate mean m, over the last axis of x:
    K+ bets that the mean is above m, K- below; theta = 1/2. The hedged capital is their
    maximum; m is rejected once it reaches 1 / alpha."""
    np = _np()
    x = np.asarray(x, dtype=float)
    bets = predictable_bets(x, alpha)
    up = np.minimum(bets, TRUNCATION / m) if m > 0 else bets
    down = np.minimum(bets, TRUNCATION / (1 - m)) if m < 1 else bets
    log_half = math.log(0.5)
    return (
        log_half + np.cumsum(np.log1p(up * (x - m)), axis=-1),
        log_half + np.cumsum(np.log1p(-down * (x - m)), axis=-1),
    )


def first_decision(x: Any, m: float, alpha: float) -> tuple[Any, Any]:
    """For each sequence (rows of x): the index of the first draw after which m leaves the
    betting confidence sequence (-1: never), and on which side the sequence then lies
    (+1 above m, -1 below, 0 never). What a gate on threshold m decides, and when."""
    np = _np()
    up, down = hedged_log_capital(x, m, alpha)
    level = math.log(1 / alpha)
    crossed = np.maximum(up, down) >= level
    any_cross = crossed.any(axis=-1)
    first = np.where(any_cross, crossed.argmax(axis=-1), -1)
    at = np.clip(first, 0, None)[..., None]
    side = np.where(np.take_along_axis(up, at, -1) >= np.take_along_axis(down, at, -1), 1, -1)[..., 0]
    return first, np.where(any_cross, side, 0)


@dataclass(frozen=True)
class Interval:
    """Bounds of a confidence set; a bound that is a rejected candidate is excluded (the
    set lies strictly inside it), a bound at the edge of the range is not."""

    low: float
    high: float


class BettingCS:
    """The betting confidence sequence of a mean of draws in `bounds`, updated one draw at a
    time (`add`); `interval` is the running intersection so far. `thresholds` join the grid,
    so a gate's threshold is decided by the capital at exactly it, not at a neighbour."""

    def __init__(
        self,
        alpha: float = 0.05,
        bounds: tuple[float, float] = (0.0, 1.0),
        thresholds: Iterable[float] = (),
        breaks: int = BREAKS,
    ) -> None:
        np = _np()
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must be within (0, 1), got {alpha}")
        low, high = bounds
        if not low < high:
            raise ValueError(f"bounds must be (low, high) with low < high, got {bounds}")
        self.alpha, self.bounds = alpha, (float(low), float(high))
        inside = [self._unit(t) for t in thresholds if low <= t <= high]
        self.grid = np.unique(np.concatenate([np.linspace(0.0, 1.0, breaks + 1), np.array(inside, float)]))
        self.log_up = np.full(self.grid.shape, math.log(0.5))
        self.log_down = np.full(self.grid.shape, math.log(0.5))
        self.alive = np.ones(self.grid.shape, dtype=bool)  # never rejected so far
        self.n = 0
        self.total = 0.0  # sum of the draws in [0, 1]
        self.squares = 0.0  # sum of (x_i - mean_i)^2, the plug-in variance's
        self.level = math.log(1 / alpha)

    def _unit(self, value: float) -> float:
        low, high = self.bounds
        return (value - low) / (high - low)

    def _back(self, unit: float) -> float:
        low, high = self.bounds
        return low + unit * (high - low)

    def add(self, value: float) -> None:
        np = _np()
        low, high = self.bounds
        if not low <= value <= high:
            raise ValueError(f"a draw of {value} is outside the bounds {self.bounds}")
        x = self._unit(value)
        t = self.n + 1
        variance = (PRIOR_VARIANCE + self.squares) / t  # sigma2_{t-1}, from draws before t
        bet = math.sqrt(2 * math.log(2 / self.alpha) / (variance * t * math.log1p(t)))
        grid = self.grid
        with np.errstate(divide="ignore"):
            up = np.minimum(bet, TRUNCATION / grid)
            down = np.minimum(bet, TRUNCATION / (1 - grid))
        self.log_up += np.log1p(up * (x - grid))
        self.log_down += np.log1p(-down * (x - grid))
        rejected = np.maximum(self.log_up, self.log_down) >= self.level
        still = self.alive & ~rejected
        if still.any():  # kept non-empty: an empty set (probability <= alpha) says nothing new
            self.alive = still
        self.n = t
        self.total += x
        self.squares += (x - (PRIOR_MEAN + self.total) / (t + 1)) ** 2

    def extend(self, values: Iterable[float]) -> BettingCS:
        for value in values:
            self.add(value)
        return self

    @property
    def mean(self) -> float | None:
        return self._back(self.total / self.n) if self.n else None

    def _ends(self) -> tuple[int, int]:
        where = _np().flatnonzero(self.alive)
        return int(where[0]), int(where[-1])

    @property
    def interval(self) -> Interval:
        """The smallest interval between rejected grid points that holds every candidate
        never rejected: the continuous confidence set lies strictly inside it."""
        first, last = self._ends()
        low = self.grid[first - 1] if first > 0 else 0.0
        high = self.grid[last + 1] if last + 1 < len(self.grid) else 1.0
        return Interval(round(self._back(float(low)), 12), round(self._back(float(high)), 12))

    def side_of(self, threshold: float) -> int:
        """+1: the confidence set lies wholly above the threshold (a rejected candidate at or
        above it bounds it from below); -1: wholly below; 0: it may hold the threshold."""
        first, last = self._ends()
        unit = self._unit(threshold)
        if first > 0 and self.grid[first - 1] >= unit:
            return 1
        if last + 1 < len(self.grid) and self.grid[last + 1] <= unit:
            return -1
        return 0

    def decide(self, op: str, threshold: float) -> str:
        """PASS when the interval lies wholly where `mean OP threshold` holds, FAIL when wholly
        where it does not, UNDECIDED while it holds the threshold (op: >=, >, <=, <)."""
        if op not in (">=", ">", "<=", "<"):
            raise ValueError(f"a confidence sequence decides >=, >, <= and <, not {op}")
        side = self.side_of(threshold)
        if side == 0:
            return UNDECIDED
        return PASS if (side > 0) == (op in (">=", ">")) else FAIL


def hoeffding_interval(mean: float, draws: int, alpha: float) -> tuple[float, float]:
    """Hoeffding's fixed-time interval for the mean of `draws` independent draws in [0, 1],
    each with its own mean (the interval is for their average): mean +- sqrt(log(2 / alpha)
    / (2 draws)), clipped to [0, 1]. For one look at a fixed number of draws."""
    radius = math.sqrt(math.log(2 / alpha) / (2 * draws))
    return round(max(0.0, mean - radius), 12), round(min(1.0, mean + radius), 12)


def hoeffding_rho(draws: int, alpha: float) -> float:
    """The normal mixture's rho that makes the boundary tightest after `draws` draws of
    variance proxy 1/4 (Hoeffding, draws in [0, 1]): rho = r v with r solving
    log((1 + r) / r) + 2 log(1 / alpha) = 1 / r, found by bisection on r."""
    low, high = 1e-9, 1e9
    for _ in range(200):
        r = math.sqrt(low * high)
        if math.log((1 + r) / r) + 2 * math.log(1 / alpha) - 1 / r > 0:
            high = r
        else:
            low = r
    return math.sqrt(low * high) * draws / 4


def hoeffding_mixture_radius(draws: int, alpha: float, rho: float) -> float:
    """Half-width after `draws` draws of the two-sided normal-mixture confidence sequence
    for a mean of draws in [0, 1]: |S_t - t mu| < sqrt((v + rho) log((v + rho) / (rho
    alpha^2))) with v = t / 4, divided by t."""
    v = draws / 4
    return math.sqrt((v + rho) * math.log((v + rho) / (rho * alpha**2))) / draws
