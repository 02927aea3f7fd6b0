"""pass@k, the unbiased estimator of Chen et al. (2021): of n samples with c correct, the
chance that k drawn without replacement hold a correct one, 1 - C(n-c, k) / C(n, k).
Computed exactly (a Fraction) and rounded once, so it equals the enumeration of every
k-subset to the last bit."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from math import comb


def _check(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n:
        raise ValueError(f"c={c} correct of n={n} samples: need 0 <= c <= n")
    if not 0 <= k <= n:
        raise ValueError(f"k={k} of n={n} samples: need 0 <= k <= n")


def pass_at_k_exact(n: int, c: int, k: int) -> Fraction:
    _check(n, c, k)
    return 1 - Fraction(comb(n - c, k), comb(n, k))


def unbiased_pass_at_k(n: int, c: int, k: int) -> float:
    """The estimator as a float (the exact value, rounded once)."""
    return float(pass_at_k_exact(n, c, k))


def mean_pass_at_k(counts: Sequence[tuple[int, int]], k: int) -> float:
    """Mean pass@k over problems, each given as (n, c); the exact mean, rounded once."""
    if not counts:
        raise ValueError("no problems to average pass@k over")
    misses: dict[int, int] = {}  # per n: the sum of C(n-c, k), one Fraction per distinct n
    for n, c in counts:
        _check(n, c, k)
        misses[n] = misses.get(n, 0) + comb(n - c, k)
    missed = sum((Fraction(total, comb(n, k)) for n, total in misses.items()), Fraction(0))
    return float((len(counts) - missed) / len(counts))
