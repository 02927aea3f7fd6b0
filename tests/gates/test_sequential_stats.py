"""The betting confidence sequence (stats/sequential.py) against confseq's `betting_cs` on
fixed sequences, by hand on the first draws, by simulated coverage at every time, and the
closed-form Hoeffding normal-mixture sequence by its definition.

Waudby-Smith and Ramdas (JRSS-B 2024) print no table of numbers to check against (their
examples are figures), so the reference values are confseq's: its betting.py (commit 70b1ef3
of github.com/gostevehoward/confseq) run with `running_intersection=True` on the same
sequences. Its package does not install here (a C++ extension against Boost), so the values
are pinned; `benchmarks/sequential_gates.py --confseq-src` reruns the comparison."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_agenteval.stats.sequential import (
    FAIL,
    PASS,
    UNDECIDED,
    BettingCS,
    first_decision,
    hedged_log_capital,
    hoeffding_mixture_radius,
    hoeffding_rho,
    predictable_bets,
)


def bernoulli(seed: int, p: float, n: int) -> np.ndarray:
    return (np.random.default_rng(seed).random(n) < p).astype(float)


# (seed, p, n, alpha, time, confseq's low, confseq's high)
CONFSEQ = [
    (1, 0.4, 50, 0.05, 10, 0.0, 0.683),
    (1, 0.4, 50, 0.05, 25, 0.11, 0.628),
    (1, 0.4, 50, 0.05, 50, 0.146, 0.536),
    (2, 0.1, 200, 0.05, 10, 0.0, 0.64),
    (2, 0.1, 200, 0.05, 100, 0.03, 0.166),
    (2, 0.1, 200, 0.05, 200, 0.046, 0.166),
    (3, 0.75, 120, 0.05, 10, 0.443, 1.0),
    (3, 0.75, 120, 0.05, 60, 0.651, 0.94),
    (3, 0.75, 120, 0.05, 120, 0.672, 0.907),
]


@pytest.mark.parametrize(("seed", "p", "n", "alpha", "time", "low", "high"), CONFSEQ)
def test_the_interval_is_confseqs(seed, p, n, alpha, time, low, high):
    cs = BettingCS(alpha).extend(bernoulli(seed, p, n)[:time])
    assert (round(cs.interval.low, 3), round(cs.interval.high, 3)) == (low, high)


def test_a_paired_difference_maps_to_unit_and_back():
    """Differences in [-1, 1] at 0.90: confseq's betting_cs of (d + 1) / 2, mapped back."""
    d = np.random.default_rng(4).integers(-1, 2, 100).astype(float)
    cs = BettingCS(0.1, bounds=(-1, 1))
    seen = {}
    for t, value in enumerate(d, 1):
        cs.add(float(value))
        seen[t] = (round(cs.interval.low, 3), round(cs.interval.high, 3))
    assert seen[25] == (-0.116, 0.716)
    assert seen[100] == (-0.03, 0.4)
    assert cs.mean == pytest.approx(0.11)


def test_the_first_draws_by_hand():
    """x = 1, 1 at m = 0.5, alpha 0.05: the bets (sqrt(2 log 40 / (0.25 * 1 * log 2)) and,
    with sigma2_1 = (0.25 + (1 - 0.75)^2) / 2, sqrt(2 log 40 / (0.15625 * 2 * log 3))) are
    both truncated to 0.5 / 0.5 = 1: theta K+ = 0.5 * 1.5 * 1.5, (1 - theta) K- = 0.5 * 0.5 * 0.5."""
    bets = predictable_bets([1.0, 1.0], 0.05)
    assert bets[0] == pytest.approx(math.sqrt(2 * math.log(40) / (0.25 * math.log(2))))
    assert bets[1] == pytest.approx(math.sqrt(2 * math.log(40) / (0.15625 * 2 * math.log(3))))
    up, down = hedged_log_capital([1.0, 1.0], 0.5, 0.05)
    assert np.exp(up) == pytest.approx([0.75, 1.125])
    assert np.exp(down) == pytest.approx([0.25, 0.125])


@pytest.mark.parametrize("p", [0.02, 0.4, 0.5, 0.9])
def test_it_covers_the_mean_at_every_time(p):
    """2,000 sequences of 1,000 draws: the share whose interval ever leaves the true mean
    (the capital at it ever reaches 1 / alpha) is at most alpha = 0.05 (Ville)."""
    x = np.random.default_rng(int(p * 100)).random((2000, 1000)) < p
    first, _ = first_decision(x.astype(float), p, 0.05)
    assert np.mean(first >= 0) <= 0.05


def test_the_grid_and_the_capital_at_the_threshold_decide_alike():
    """A gate's decision read from the capital at its threshold (the simulation's) is the
    grid's: the same draw, the same side."""
    for seed in range(30):
        p = 0.25 + 0.02 * seed
        x = bernoulli(100 + seed, p, 300)
        first, side = first_decision(x[None, :], 0.4, 0.05)
        cs, decided_at, verdict = BettingCS(0.05, thresholds=[0.4]), -1, UNDECIDED
        for t, value in enumerate(x):
            cs.add(float(value))
            verdict = cs.decide(">=", 0.4)
            if verdict != UNDECIDED:
                decided_at = t
                break
        assert decided_at == first[0]
        assert verdict == {1: PASS, -1: FAIL, 0: UNDECIDED}[int(side[0])]


@pytest.mark.parametrize(
    ("draws", "op", "threshold", "verdict"),
    [
        ([1.0] * 40, ">=", 0.4, PASS),
        ([1.0] * 40, "<", 0.4, FAIL),
        ([0.0] * 40, ">=", 0.4, FAIL),
        ([0.0] * 40, "<=", 0.4, PASS),
        ([1.0, 0.0] * 20, ">=", 0.4, UNDECIDED),
        ([1.0] * 3, ">=", 0.4, UNDECIDED),
    ],
)
def test_decisions(draws, op, threshold, verdict):
    assert BettingCS(0.05, thresholds=[threshold]).extend(draws).decide(op, threshold) == verdict


def test_a_threshold_in_the_grid_bounds_the_interval():
    """The interval ends at the nearest rejected candidate: the threshold itself, once it is
    rejected, not the grid point beside it."""
    cs = BettingCS(0.05, thresholds=[0.4003]).extend([1.0] * 40)
    assert cs.interval.low == 0.4003 or cs.interval.low > 0.4003


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (dict(alpha=0.0), "alpha must be within"),
        (dict(alpha=0.05, bounds=(1, 0)), "bounds must be"),
    ],
)
def test_bad_arguments(args, error):
    with pytest.raises(ValueError, match=error):
        BettingCS(**args)


def test_a_draw_outside_the_bounds_and_an_equality_are_refused():
    with pytest.raises(ValueError, match="outside the bounds"):
        BettingCS(0.05).add(1.5)
    with pytest.raises(ValueError, match="not =="):
        BettingCS(0.05).decide("==", 0.4)


# (draws, alpha, half-width of the Hoeffding normal mixture tuned at those draws)
HOEFFDING = [(50, 0.05, 0.2146), (200, 0.05, 0.1073), (1000, 0.05, 0.0480), (200, 0.1, 0.0977)]


@pytest.mark.parametrize(("draws", "alpha", "radius"), HOEFFDING)
def test_hoeffding_normal_mixture(draws, alpha, radius):
    """sqrt((v + rho) log((v + rho) / (rho alpha^2))) / t with v = t / 4, and rho the
    minimiser at t: a finer search over rho finds nothing smaller."""
    rho = hoeffding_rho(draws, alpha)
    found = hoeffding_mixture_radius(draws, alpha, rho)
    assert round(found, 4) == radius
    v = draws / 4
    by_hand = math.sqrt((v + rho) * math.log((v + rho) / (rho * alpha**2))) / draws
    assert found == pytest.approx(by_hand)
    grid = [rho * 10 ** (k / 50) for k in range(-100, 101)]
    assert min(hoeffding_mixture_radius(draws, alpha, r) for r in grid) >= found - 1e-12
