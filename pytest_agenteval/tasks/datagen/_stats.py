"""The pointwise (LLM judge) metrics and their intervals: pure functions of verdicts. The
statistics are `pytest_agenteval.stats`' (Wilson, the cluster bootstrap); `wilson` is
re-exported here for the modules of this package that import it from here.

Pass and excellent compare integer sums (a mean of 3.5 over 4 dimensions and k judges
is a sum of 14k), never floats. Invalid verdicts are counted, never scored."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pytest_agenteval.stats.bootstrap import cluster_bootstrap
from pytest_agenteval.stats.proportions import clustered_proportion
from pytest_agenteval.stats.proportions import wilson as wilson
from pytest_agenteval.tasks.datagen._verdict import DIMENSIONS

BOOTSTRAP_ITERATIONS = 2000
PASS_SUM, EXCELLENT_SUM = 14, 18  # of four 1-5 scores: mean 3.5 and 4.5


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


def item_totals(judgments: Sequence[Mapping[str, Any]]) -> list[int]:
    """Sum of the four scores of each valid verdict of one item (one per judge)."""
    return [sum(j["scores"].values()) for j in judgments if j.get("status") == "valid"]


def item_passes(judgments: Sequence[Mapping[str, Any]]) -> bool | None:
    """Panel mean >= 3.5; None without a valid verdict."""
    totals = item_totals(judgments)
    return sum(totals) >= PASS_SUM * len(totals) if totals else None


def _per_judge(judgments: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in sorted({j["judge"] for j in judgments}):
        own = [j for j in judgments if j["judge"] == name]
        valid = [j for j in own if j.get("status") == "valid"]
        totals = [sum(j["scores"].values()) / 4 for j in valid]
        out[name] = {
            "judgments": len(own),
            "valid": len(valid),
            "invalid": sum(j.get("status") == "invalid" for j in own),
            "errors": sum(j.get("status") == "error" for j in own),
            "valid_rate": _ratio(len(valid), len(own)),
            "mean_score": _ratio(sum(totals), len(totals)),
            "parse_modes": dict(Counter(j.get("parse_mode", "none") for j in own)),
            "refused_modes": sorted({m for j in own for m in j.get("refused_modes", ())}),
            "reasked": sum(j.get("asks", 1) > 1 for j in own),
        }
    return out


def pointwise_summary(per_item: Sequence[Sequence[Mapping[str, Any]]], seed: int) -> dict[str, Any]:
    """`per_item`: the pointwise verdicts of each item (every judge, every status)."""
    everything = [j for item in per_item for j in item]
    valid = [j for j in everything if j.get("status") == "valid"]
    scored = [item for item in per_item if item_totals(item)]

    def mean_score(items: Sequence[Sequence[Mapping[str, Any]]]) -> float | None:
        means = [sum(item_totals(i)) / (4 * len(item_totals(i))) for i in items]
        return _ratio(sum(means), len(means))

    passed = sum(bool(item_passes(i)) for i in scored)
    excellent = sum(sum(item_totals(i)) >= EXCELLENT_SUM * len(item_totals(i)) for i in scored)
    dims: dict[str, Any] = {}
    for dim in DIMENSIONS:

        def dim_mean(items: Sequence[Sequence[Mapping[str, Any]]], dim: str = dim) -> float | None:
            values = [
                float(np.mean([j["scores"][dim] for j in i if j.get("status") == "valid"])) for i in items
            ]
            return _ratio(sum(values), len(values))

        value = dim_mean(scored)
        interval = cluster_bootstrap(scored, dim_mean, seed, BOOTSTRAP_ITERATIONS)
        dims[dim] = {
            "mean": None if value is None else round(value, 6),
            "ci95": interval.bounds(),
            "undefined_resamples": interval.undefined,
        }
    score = mean_score(scored)
    score_interval = cluster_bootstrap(scored, mean_score, seed, BOOTSTRAP_ITERATIONS)
    valid_interval = clustered_proportion(  # k judges' verdicts on one item are one cluster
        [sum(j.get("status") == "valid" for j in item) for item in per_item],
        [len(item) for item in per_item],
        seed,
        BOOTSTRAP_ITERATIONS,
    )
    return {
        "judgments": len(everything),
        "valid": len(valid),
        "invalid": sum(j.get("status") == "invalid" for j in everything),
        "errors": sum(j.get("status") == "error" for j in everything),
        "valid_rate": _ratio(len(valid), len(everything)),
        "valid_rate_ci95": valid_interval.bounds(),
        "items": len(per_item),
        "items_scored": len(scored),
        "items_without_valid_verdict": len(per_item) - len(scored),
        "mean_score": None if score is None else round(score, 6),
        "mean_score_ci95": score_interval.bounds(),
        "pass_rate": _ratio(passed, len(scored)),
        "pass_rate_ci95": wilson(passed, len(scored)),
        "excellent_rate": _ratio(excellent, len(scored)),
        "excellent_rate_ci95": wilson(excellent, len(scored)),
        "per_dimension": dims,
        "undefined_resamples": {
            "mean_score_ci95": score_interval.undefined,
            "valid_rate_ci95": valid_interval.undefined,
        },
        "per_judge": _per_judge(everything),
    }
