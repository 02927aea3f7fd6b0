"""Krippendorff's alpha (Krippendorff 2011, "Computing Krippendorff's alpha-reliability"),
our own implementation (the PyPI package is GPL): nominal, ordinal, interval and ratio
levels, missing values allowed. Undefined (None) with fewer than two pairable values or no
variation; a bootstrap of alpha counts such resamples (`stats.bootstrap`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

Value = float | None


def _delta(domain: np.ndarray, n_c: np.ndarray, level: str) -> np.ndarray:
    c, k = np.meshgrid(domain, domain, indexing="ij")
    if level == "nominal":
        return (c != k).astype(float)
    if level == "interval":
        return (c - k) ** 2
    if level == "ratio":
        total = c + k
        return np.divide((c - k) ** 2, total**2, out=np.zeros_like(total, dtype=float), where=total != 0)
    if level == "ordinal":
        cumulative = np.concatenate([[0.0], np.cumsum(n_c)])
        i, j = np.meshgrid(np.arange(len(domain)), np.arange(len(domain)), indexing="ij")
        low, high = np.minimum(i, j), np.maximum(i, j)
        between = cumulative[high + 1] - cumulative[low]
        return (between - (n_c[i] + n_c[j]) / 2) ** 2
    raise ValueError(f"unknown level of measurement {level!r}")


def krippendorff_alpha(units: Sequence[Sequence[Value]], level: str = "ordinal") -> float | None:
    """`units`: for each unit (item), the values its coders gave (None or NaN = missing).
    None when alpha is undefined (fewer than two pairable values, or no variation)."""
    pairable = []
    for unit in units:
        values = [float(v) for v in unit if v is not None and not math.isnan(float(v))]
        if len(values) >= 2:
            pairable.append(values)
    if not pairable:
        return None
    domain = np.array(sorted({v for unit in pairable for v in unit}))
    if len(domain) < 2:
        return None
    index = {v: i for i, v in enumerate(domain)}
    coincidences = np.zeros((len(domain), len(domain)))
    for values in pairable:
        counts = np.zeros(len(domain))
        for v in values:
            counts[index[v]] += 1
        coincidences += (np.outer(counts, counts) - np.diag(counts)) / (len(values) - 1)
    n_c = coincidences.sum(axis=1)
    n = n_c.sum()
    delta = _delta(domain, n_c, level)
    expected = (np.outer(n_c, n_c) * delta).sum()
    if expected == 0:
        return None
    return float(1 - (n - 1) * (coincidences * delta).sum() / expected)


def reliability_units(rows: Sequence[Sequence[Value]]) -> list[list[Value]]:
    """Coders x units (the `krippendorff` package's `reliability_data`) to units."""
    return [list(column) for column in zip(*rows, strict=True)]
