"""The statistics module (`pytest_agenteval.stats`) against oracles: pass@k against the
enumeration of every k-subset (exact, in fractions), Wilson against published values, the
percentile bootstrap against `scipy.stats.bootstrap`, Krippendorff's alpha against the
`krippendorff` package, and undefined resamples counted."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from itertools import combinations

import numpy as np
import pytest

from pytest_agenteval.api.metrics import bootstrap_intervals, pass_at_k_curve, summarize_math
from pytest_agenteval.api.records import GenerationRecord, ProblemRecord, Rollout, Score
from pytest_agenteval.stats.bootstrap import cluster_bootstrap, ratio_bootstrap, resamples
from pytest_agenteval.stats.krippendorff import krippendorff_alpha, reliability_units
from pytest_agenteval.stats.paired import paired_bootstrap
from pytest_agenteval.stats.pass_at_k import mean_pass_at_k, pass_at_k_exact, unbiased_pass_at_k
from pytest_agenteval.stats.proportions import CLUSTERED, WILSON, clustered_proportion, wilson
from tests._oracle import require_oracle

# --- pass@k: the estimator is the enumeration of every k-subset, exactly -----------------


def enumerated_pass_at_k(n: int, c: int, k: int) -> Fraction:
    """Of all k-subsets of n samples whose first c are correct: the share holding a correct one."""
    subsets = list(combinations(range(n), k))
    return Fraction(sum(any(i < c for i in subset) for subset in subsets), len(subsets))


EXHAUSTIVE = [(n, c, k) for n in range(1, 7) for c in range(n + 1) for k in range(n + 1)]


@pytest.mark.parametrize(("n", "c", "k"), EXHAUSTIVE)
def test_pass_at_k_equals_the_enumeration_of_every_subset(n: int, c: int, k: int) -> None:
    exact = enumerated_pass_at_k(n, c, k)
    assert pass_at_k_exact(n, c, k) == exact
    assert unbiased_pass_at_k(n, c, k) == float(exact)  # rounded once, to the last bit


@pytest.mark.parametrize("k", range(1, 5))
def test_pass_at_k_mean_over_problems_is_the_exact_mean(k: int) -> None:
    counts = [(4, 2), (4, 0), (4, 1), (6, 5), (6, 3), (5, 1)]
    exact = sum((enumerated_pass_at_k(n, c, k) for n, c in counts), Fraction(0)) / len(counts)
    assert mean_pass_at_k(counts, k) == float(exact)


def test_pass_at_k_curve_of_records_is_the_exact_mean() -> None:
    records = [
        record(i, n, c) for i, (n, c) in enumerate([(6, 0), (6, 0), (6, 1)])
    ]  # a float sum is off at k = 1, 2, 4
    curve = pass_at_k_curve(records)
    assert curve == {
        str(k): float(sum((enumerated_pass_at_k(6, c, k) for c in (0, 0, 1)), Fraction(0)) / 3)
        for k in range(1, 7)
    }


@pytest.mark.parametrize(("n", "c", "k"), [(3, 4, 1), (3, -1, 1), (3, 1, 4), (3, 1, -1)])
def test_pass_at_k_refuses_counts_outside_the_table(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError, match="need 0 <="):
        unbiased_pass_at_k(n, c, k)


# --- Wilson ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("successes", "total", "published"),
    [  # Newcombe (1998), Statistics in Medicine 17:857, Table I, method 3 (Wilson score)
        (81, 263, (0.2553, 0.3662)),
        (15, 148, (0.0624, 0.1605)),
        (0, 20, (0.0, 0.1611)),
        (1, 29, (0.0061, 0.1718)),
    ],
)
def test_wilson_matches_published_values(successes: int, total: int, published: tuple[float, float]) -> None:
    low, high = wilson(successes, total)
    assert (round(low, 4), round(high, 4)) == published


@pytest.mark.parametrize(
    ("successes", "total", "interval"),
    [
        (0, 1, [0.0, 0.793451]),
        (1, 1, [0.206549, 1.0]),
        (0, 30, [0.0, 0.113513]),
        (30, 30, [0.886487, 1.0]),
        (0, 120, [0.0, 0.031019]),  # the upper bound at 0 is z^2 / (n + z^2)
    ],
)
def test_wilson_never_collapses_at_zero_or_one(successes: int, total: int, interval: list[float]) -> None:
    assert wilson(successes, total) == interval


def test_wilson_refuses_more_successes_than_trials() -> None:
    with pytest.raises(ValueError, match="outside 0..total"):
        wilson(5, 4)


# --- the summary's intervals: Wilson where the bootstrap collapses --------------------------


def record(pid: int, n: int, correct: int, formatted: int | None = None) -> ProblemRecord:
    formatted = n if formatted is None else formatted
    generations = tuple(
        GenerationRecord(j, j, Rollout("t", "a"), Score(j < correct, j < formatted, 1 if j < correct else 2))
        for j in range(n)
    )
    return ProblemRecord("aime25", pid, pid, "p", 1, n, generations)


@pytest.mark.parametrize(
    ("correct", "expected"),
    [
        (  # every generation wrong: 30 problems x 4 generations
            0,
            {
                "average_at_n": wilson(0, 120),
                "pass_at_n": wilson(0, 30),
                "format_rate": wilson(120, 120),
                "maj_at_n": wilson(0, 30),
            },
        ),
        (  # every generation right
            4,
            {
                "average_at_n": wilson(120, 120),
                "pass_at_n": wilson(30, 30),
                "format_rate": wilson(120, 120),
                "maj_at_n": wilson(30, 30),
            },
        ),
    ],
)
def test_summary_intervals_never_collapse_at_zero_or_one(correct: int, expected: dict) -> None:
    summary = summarize_math([record(i, 4, correct) for i in range(30)], bootstrap_seed=5)
    assert summary["ci95"] == expected
    assert all(high > low for low, high in summary["ci95"].values())
    assert summary["ci95_method"] == {
        "average_at_n": CLUSTERED,
        "pass_at_n": WILSON,
        "format_rate": CLUSTERED,
        "maj_at_n": WILSON,
    }
    assert summary["ci95_undefined_resamples"] == dict.fromkeys(expected, 0)


MIXED = [record(i, 4, c, f) for i, (c, f) in enumerate([(4, 4), (0, 3), (1, 4), (4, 4), (0, 0), (2, 4)] * 5)]


def test_average_at_n_is_the_cluster_bootstrap_widened_to_wilson_over_generations() -> None:
    boot = bootstrap_intervals(MIXED, seed=9)
    summary = summarize_math(MIXED, bootstrap_seed=9)
    for name, successes in (("average_at_n", 55), ("format_rate", 95)):
        floor = wilson(successes, 120)
        hull = [min(boot[name][0], floor[0]), max(boot[name][1], floor[1])]
        assert summary["ci95"][name] == hull
    # six kinds of problem, strongly clustered: the bootstrap is the wider of the two here
    assert summary["ci95"]["average_at_n"] == boot["average_at_n"]
    assert summary["ci95"]["pass_at_n"] == wilson(20, 30)


def test_one_generation_per_problem_is_plain_wilson() -> None:
    summary = summarize_math([record(i, 1, int(i % 3 == 0)) for i in range(12)])
    assert summary["ci95"]["average_at_n"] == summary["ci95"]["pass_at_n"] == wilson(4, 12)
    assert summary["ci95_method"]["average_at_n"] == WILSON


def test_no_problems_give_no_intervals() -> None:
    summary = summarize_math([])
    assert summary["ci95"] == dict.fromkeys(("average_at_n", "pass_at_n", "format_rate", "maj_at_n"))


# --- undefined resamples: counted, never dropped silently -----------------------------------


def same_cluster_rows(clusters: int, iterations: int, seed: int, members: Sequence[int]) -> int:
    """How many resamples (the module's own stream) draw only from `members`."""
    allowed = np.isin(np.arange(clusters), members)
    return sum(int(allowed[rows].all(axis=1).sum()) for rows in resamples(clusters, iterations, seed))


def test_a_statistic_undefined_on_a_resample_is_counted() -> None:
    def spread(sample: Sequence[float]) -> float | None:  # undefined without variation
        return None if len(set(sample)) == 1 else max(sample) - min(sample)

    interval = cluster_bootstrap([1.0, 3.0], spread, seed=4, iterations=1000)
    undefined = same_cluster_rows(2, 1000, 4, [0]) + same_cluster_rows(2, 1000, 4, [1])
    assert 0 < undefined < 1000
    assert (interval.undefined, interval.iterations, interval.bounds()) == (undefined, 1000, [2.0, 2.0])


def test_a_ratio_over_nothing_is_an_undefined_resample() -> None:
    interval = ratio_bootstrap([1, 0, 0], [2, 0, 0], seed=2, iterations=500)
    assert interval.undefined == same_cluster_rows(3, 500, 2, [1, 2]) > 0
    assert interval.bounds() == [0.5, 0.5]


def test_a_problem_without_generations_makes_undefined_resamples_in_the_summary() -> None:
    records = [record(0, 2, 1), record(1, 0, 0), record(2, 0, 0)]
    summary = summarize_math(records, bootstrap_seed=3)
    undefined = same_cluster_rows(3, 1000, 3, [1, 2])
    assert summary["ci95_undefined_resamples"] == {
        "average_at_n": undefined,
        "pass_at_n": 0,
        "format_rate": undefined,
        "maj_at_n": 0,
    }


def test_no_defined_resample_gives_no_interval_and_says_how_many() -> None:
    interval = cluster_bootstrap([1.0, 1.0, 1.0], lambda sample: None, seed=0, iterations=300)
    assert (interval.bounds(), interval.undefined, interval.iterations) == (None, 300, 300)


def test_clustered_proportion_of_clusters_without_trials_is_wilson_over_what_there_is() -> None:
    interval = clustered_proportion([0, 0], [0, 0], seed=0, iterations=100)
    assert (interval.bounds(), interval.method) == (None, WILSON)


# --- the bootstrap against scipy.stats.bootstrap (percentile method) ------------------------
#
# Both are Monte Carlo estimates of the same percentiles of the same bootstrap distribution,
# from independent streams. With B resamples each, a 2.5 % quantile estimate has a standard
# error of about sqrt(q (1 - q) / B) / f(x_q); for a near-normal distribution with standard
# deviation s, f(x_q) = phi(1.96) / s, so at B = 20,000 one estimate's error is 0.0189 s and
# the difference of two has 0.0267 s. TOLERANCE is four of those: 0.107 s, with s scipy's
# bootstrap standard error. (Seeded: the test is deterministic; the margin is the honest one.)

B = 20_000
TOLERANCE = 4 * np.sqrt(2) * np.sqrt(0.025 * 0.975 / B) / 0.05844680  # phi(1.959964) = 0.0584468


def scipy_bootstrap():
    try:
        import scipy.stats
    except ImportError:
        require_oracle("scipy is the dev extra's oracle: pip install -e '.[dev]'")
    return scipy.stats


def assert_close(ours: Sequence[float] | None, theirs, label: str) -> None:
    assert ours is not None
    margin = TOLERANCE * float(theirs.standard_error)
    low, high = theirs.confidence_interval
    assert abs(ours[0] - low) <= margin, (label, ours, (low, high), margin)
    assert abs(ours[1] - high) <= margin, (label, ours, (low, high), margin)


def test_the_mean_matches_scipy() -> None:
    stats = scipy_bootstrap()
    x = np.random.default_rng(11).gamma(2.0, 1.5, size=60)
    ours = ratio_bootstrap(x, np.ones_like(x), seed=1, iterations=B).bounds()
    theirs = stats.bootstrap((x,), np.mean, method="percentile", n_resamples=B, rng=np.random.default_rng(2))
    assert_close(ours, theirs, "mean")


def test_average_at_n_resampling_problems_matches_scipy() -> None:
    stats = scipy_bootstrap()
    rng = np.random.default_rng(12)
    sizes = rng.integers(2, 9, size=40)
    correct = rng.binomial(sizes, rng.beta(0.8, 1.2, size=40))
    records = [record(i, int(n), int(c)) for i, (n, c) in enumerate(zip(sizes, correct, strict=True))]
    ours = bootstrap_intervals(records, iterations=B, seed=3)["average_at_n"]

    def ratio(index: np.ndarray, axis: int = -1) -> np.ndarray:  # resamples problems, N stays with each
        return correct[index].sum(axis=axis) / sizes[index].sum(axis=axis)

    theirs = stats.bootstrap(
        (np.arange(40),),
        ratio,
        vectorized=True,
        method="percentile",
        n_resamples=B,
        rng=np.random.default_rng(4),
    )
    assert_close(ours, theirs, "average_at_n")


def test_any_statistic_of_clusters_matches_scipy() -> None:
    stats = scipy_bootstrap()
    rng = np.random.default_rng(13)
    items = [list(rng.integers(1, 6, size=int(k))) for k in rng.integers(1, 4, size=30)]  # judges' scores

    def mean_of_means(sample: Sequence[Sequence[int]]) -> float:
        return float(np.mean([np.mean(item) for item in sample]))

    ours = cluster_bootstrap(items, mean_of_means, seed=5, iterations=B).bounds()
    means = np.array([np.mean(item) for item in items])
    theirs = stats.bootstrap(
        (means,), np.mean, method="percentile", n_resamples=B, rng=np.random.default_rng(6)
    )
    assert_close(ours, theirs, "mean of item means")


def test_the_paired_comparison_matches_scipy() -> None:
    stats = scipy_bootstrap()
    rng = np.random.default_rng(14)
    old = rng.integers(0, 5, size=50) / 4
    new = np.clip(old + rng.choice([-0.25, 0.0, 0.25, 0.5], size=50), 0, 1)
    ids = [f"p{i}" for i in range(50)]
    _, _, _, ours = paired_bootstrap(
        dict(zip(ids, old, strict=True)), dict(zip(ids, new, strict=True)), B, seed=7
    )

    def mean_difference(before: np.ndarray, after: np.ndarray, axis: int = -1) -> np.ndarray:
        return (after - before).mean(axis=axis)

    theirs = stats.bootstrap(
        (old, new),
        mean_difference,
        paired=True,
        vectorized=True,
        method="percentile",
        n_resamples=B,
        rng=np.random.default_rng(8),
    )
    assert_close(list(ours), theirs, "paired difference")


# --- Krippendorff's alpha against the `krippendorff` package --------------------------------
# The published tables are in tests/datagen/test_panel.py; here random tables with missing
# values against the PyPI package (GPL: the test-oracles extra, README command 2; the package
# never imports it).


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_krippendorff_alpha_matches_the_krippendorff_package(level: str) -> None:
    try:
        import krippendorff as oracle
    except ImportError:
        require_oracle("the krippendorff package is the oracle: pip install -e '.[test-oracles]'")
    rng = np.random.default_rng(21)
    for _ in range(50):
        coders, units = int(rng.integers(2, 6)), int(rng.integers(3, 25))
        truth = rng.integers(1, 6, size=units)
        data = np.where(rng.random((coders, units)) < 0.6, truth, rng.integers(1, 6, size=(coders, units)))
        data = data.astype(float)
        data[rng.random((coders, units)) < 0.2] = np.nan
        ours = krippendorff_alpha(reliability_units(data.tolist()), level)
        with np.errstate(divide="ignore", invalid="ignore"):  # the package's NaN when undefined
            theirs = oracle.alpha(reliability_data=data, level_of_measurement=level)
        assert (ours is None, ours) == (
            bool(np.isnan(theirs)),
            None if ours is None else pytest.approx(theirs, abs=1e-12),
        )


@pytest.mark.parametrize(
    ("successes", "trials", "interval", "method"),
    [
        ([0, 0, 0, 0, 0], [1, 1, 1, 1, 1], [0.0, 0.434482], WILSON),  # BFCL at 0 %: never [0, 0]
        ([1, 1, 1, 1, 1], [1, 1, 1, 1, 1], [0.565518, 1.0], WILSON),
        ([1, 1, 0, 1, 0], [1, 1, 1, 1, 1], [0.230724, 0.882379], WILSON),
        ([0, 0, 0], [2, 2, 2], [0.0, 0.390334], CLUSTERED),  # N = 2, all wrong: widened to Wilson
        ([], [], None, WILSON),  # nothing scored: no interval
    ],
)
def test_bfcl_and_gaia_accuracy_intervals_are_wilson_where_they_would_collapse(
    successes: list[int], trials: list[int], interval: list[float] | None, method: str
) -> None:
    from pytest_agenteval.api.metrics import accuracy_intervals

    fields = accuracy_intervals(successes, trials, seed=0, iterations=200)
    assert fields == {
        "ci95": {"accuracy": interval},
        "ci95_method": {"accuracy": method},
        "ci95_undefined_resamples": {"accuracy": 0},
    }
    if interval is not None:
        assert interval == wilson(sum(successes), sum(trials))


def test_bfcl_accuracy_with_several_generations_is_the_widened_cluster_bootstrap() -> None:
    from pytest_agenteval.api.metrics import accuracy_intervals

    fields = accuracy_intervals([2, 0, 1, 2], [2, 2, 2, 2], seed=0, iterations=1000)
    low, high = fields["ci95"]["accuracy"]
    floor = wilson(5, 8)
    assert fields["ci95_method"] == {"accuracy": CLUSTERED}
    assert low <= floor[0] and high >= floor[1]
