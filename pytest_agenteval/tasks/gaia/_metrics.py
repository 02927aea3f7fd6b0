"""GAIA metrics: pure functions of per-task results.

* ``accuracy`` -- exact-match rate over *scored* items (``correct`` is not
  None; test-split items have no answer and are not scored).
* ``per_level`` -- ``{"1": {"correct", "total", "accuracy"}, ...}`` for each
  level with at least one scored item, keys in level order.
* ``drop_rates`` -- ``{"1->2": (A1 - A2) / A1, "2->3": ...}``: null when
  ``A1 == 0`` or either level has no scored item. Keys run from 1 to the
  highest level seen (at least ``"1->2"`` and ``"2->3"``).
* ``mean_steps_correct`` -- mean agent steps over correct items that report
  steps; ``mean_annotator_steps_correct`` -- the annotators' ``Number of
  steps`` over correct items that have one; ``mean_annotator_steps`` -- the
  same over every item.
* tokens (``tokens_total``, ``tokens_mean``) and latency (``latency_mean_s``,
  ``latency_p50_s``, ``latency_p95_s``; linear-interpolated percentiles)
  over every item.

Empty denominators give None (JSON null, n/a) for rates and means, never 0.0. With
items but none scored, ``not_scored`` says why (else it is None).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GaiaItemResult:
    """One task's outcome. ``correct`` is None when the task has no answer to score."""

    task_id: str
    level: int
    correct: bool | None
    steps: int | None = None
    annotator_steps: int | None = None
    tokens: int = 0
    latency_s: float = 0.0
    error: bool = False


def summarize_gaia(results: Iterable[GaiaItemResult]) -> dict[str, Any]:
    """All GAIA metrics as a JSON-ready dict (see the module docstring)."""
    items = list(results)
    scored = [item for item in items if item.correct is not None]
    correct = [item for item in scored if item.correct]
    per_level = _per_level(scored)
    errors = sum(item.error for item in items)
    latencies = sorted(item.latency_s for item in items)
    tokens_total = sum(item.tokens for item in items)
    return {
        "items": len(items),
        "scored": len(scored),
        "correct": len(correct),
        "accuracy": _rate(len(correct), len(scored)),
        "not_scored": (
            f"0 of {len(items)} items scored: none has an answer to compare (the test split's are private)"
            if items and not scored
            else None
        ),
        "errors": errors,
        "error_rate": _rate(errors, len(items)),
        "per_level": per_level,
        "drop_rates": _drop_rates(per_level),
        "mean_steps_correct": _mean([i.steps for i in correct if i.steps is not None]),
        "mean_annotator_steps_correct": _mean(
            [i.annotator_steps for i in correct if i.annotator_steps is not None]
        ),
        "mean_annotator_steps": _mean([i.annotator_steps for i in items if i.annotator_steps is not None]),
        "tokens_total": tokens_total,
        "tokens_mean": tokens_total / len(items) if items else None,
        "latency_mean_s": _mean(latencies),
        "latency_p50_s": percentile(latencies, 50),
        "latency_p95_s": percentile(latencies, 95),
    }


def drop_rate(higher: float | None, lower: float | None) -> float | None:
    """``(A_l - A_l+1) / A_l``; None when ``A_l`` is 0 or either accuracy is unknown."""
    if higher is None or lower is None or higher == 0:
        return None
    return (higher - lower) / higher


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile of ``values`` with linear interpolation (numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _per_level(scored: list[GaiaItemResult]) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for level in sorted({item.level for item in scored}):
        at_level = [item for item in scored if item.level == level]
        hits = sum(bool(item.correct) for item in at_level)
        table[str(level)] = {
            "correct": hits,
            "total": len(at_level),
            "accuracy": _rate(hits, len(at_level)),
        }
    return table


def _drop_rates(per_level: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    top = max([3, *(int(level) for level in per_level)])
    rates: dict[str, float | None] = {}
    for level in range(1, top):
        higher, lower = per_level.get(str(level)), per_level.get(str(level + 1))
        rates[f"{level}->{level + 1}"] = drop_rate(
            higher["accuracy"] if higher else None, lower["accuracy"] if lower else None
        )
    return rates


def _rate(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None
