"""BFCL metrics: pure functions over per-item results."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_agenteval.tasks.bfcl._data import ALL_CATEGORIES, CATEGORIES

SIMPLE = ("simple_python", "simple_java", "simple_javascript")
NON_LIVE_AST = ("multiple", "parallel", "parallel_multiple")
LIVE_AST = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
IRRELEVANCE = ("irrelevance", "live_irrelevance")
MULTI_TURN = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
WEB_SEARCH = ("web_search_base", "web_search_no_snippet")
MEMORY = ("memory_kv", "memory_vector", "memory_rec_sum")
# total_overall_accuracy of eval_runner_helper: group -> weight (normalised by their sum).
OVERALL_WEIGHTS: dict[str, float] = {
    "non_live": 10,
    "live": 10,
    "irrelevance": 10,
    "multi_turn": 30,
    "agentic": 40,
}

# Entry counts of bfcl-eval 2026.3.23: the official `live` weights of absent categories.
OFFICIAL_ENTRY_COUNTS: dict[str, int] = {
    "live_simple": 258,
    "live_multiple": 1053,
    "live_parallel": 16,
    "live_parallel_multiple": 24,
}


@dataclass(frozen=True)
class BfclItemResult:
    """One scored BFCL item.

    ``valid``/``lenient_valid``: verdicts with the official (strict) and the
    lenient decoder. ``expected_call``: the item expects a call (every category
    but the irrelevance ones). ``predicted_call``: a call was decoded.
    """

    id: str
    category: str
    valid: bool
    lenient_valid: bool
    error_type: str | None
    expected_call: bool
    predicted_call: bool
    params_total: int
    params_correct: int


def _rate(numerator: float, denominator: float) -> float | None:
    """None (n/a) for an empty denominator: a rate with nothing behind it is no score."""
    return numerator / denominator if denominator else None


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def summarize_bfcl(
    results: Sequence[BfclItemResult], weights: Mapping[str, float] | None = None
) -> dict[str, Any]:
    """Every BFCL metric of a run; empty inputs give ``None`` (n/a), never 0.0: no items,
    no ``accuracy`` and no leaderboard ``overall_official``.

    ``groups`` follow the official summary formulas (``eval_runner_helper``),
    computed over the categories PRESENT in ``results``, since users select
    subsets with ``-m``: simple = mean of the simple_* categories; non_live =
    mean of (simple, multiple, parallel, parallel_multiple); live = accuracy
    pooled over the live AST categories (the official entry-count weighting);
    irrelevance = mean of irrelevance and live_irrelevance; relevance =
    live_relevance; multi_turn = mean of its four categories; web_search and
    memory = means of their backends, agentic = mean of those two. A group with
    no category present is ``None``. ``overall`` = the official weights
    (non_live 10, live 10, irrelevance 10, multi_turn 30, agentic 40) over the
    groups present, normalised by their sum. ``groups_official`` applies the
    official rule instead: an absent category counts as 0 (weighted by its
    official entry count in ``live``), which matches the leaderboard only for a
    full run; its ``overall`` is the leaderboard's (``overall_official``).

    ``weighted_accuracy`` = sum(w_c * acc_c) / sum(w_c) over the present
    categories that have a weight (default: weight 1 each).
    """
    per_category = _per_category(results)
    correct = sum(r.valid for r in results)
    params_total = sum(r.params_total for r in results)
    groups, official = summary_groups(per_category), official_groups(per_category)
    return {
        "items": len(results),
        "correct": correct,
        "accuracy": _rate(correct, len(results)),
        "lenient_accuracy": _rate(sum(r.lenient_valid for r in results), len(results)),
        "error_rate": _rate(len(results) - correct, len(results)),
        "per_category": per_category,
        "overall": groups["overall"],
        "overall_official": official["overall"] if results else None,
        "groups": groups,
        "groups_official": official if results else None,
        "weighted_accuracy": weighted_accuracy(per_category, weights),
        "parameter_accuracy": _rate(sum(r.params_correct for r in results), params_total),
        "relevance": relevance_detection(results),
        "error_types": error_type_counts(results),
    }


def _per_category(results: Sequence[BfclItemResult]) -> dict[str, dict[str, Any]]:
    order = {category: index for index, category in enumerate(ALL_CATEGORIES)}
    seen = sorted({r.category for r in results}, key=lambda c: (order.get(c, len(order)), c))
    table = {}
    for category in seen:
        items = [r for r in results if r.category == category]
        correct = sum(r.valid for r in items)
        table[category] = {
            "correct": correct,
            "total": len(items),
            "accuracy": _rate(correct, len(items)),
            "lenient_accuracy": _rate(sum(r.lenient_valid for r in items), len(items)),
        }
    return table


def summary_groups(per_category: Mapping[str, Mapping[str, Any]]) -> dict[str, float | None]:
    """The official summary groups over the present categories (``None`` when none is)."""

    def accuracy(category: str) -> float | None:
        row = per_category.get(category)
        return row["accuracy"] if row else None

    simple = _mean([accuracy(c) for c in SIMPLE])
    live_rows = [per_category[c] for c in LIVE_AST if c in per_category]
    live_total = sum(row["total"] for row in live_rows)
    web_search = _mean([accuracy(c) for c in WEB_SEARCH])
    memory = _mean([accuracy(c) for c in MEMORY])
    groups = {
        "simple": simple,
        "non_live": _mean([simple, *(accuracy(c) for c in NON_LIVE_AST)]),
        "live": _rate(sum(row["correct"] for row in live_rows), live_total) if live_rows else None,
        "irrelevance": _mean([accuracy(c) for c in IRRELEVANCE]),
        "relevance": accuracy("live_relevance"),
        "multi_turn": _mean([accuracy(c) for c in MULTI_TURN]),
        "web_search": web_search,
        "memory": memory,
        "agentic": _mean([web_search, memory]),
    }
    present = {g: w for g, w in OVERALL_WEIGHTS.items() if groups[g] is not None}
    groups["overall"] = (
        sum(w * groups[g] for g, w in present.items()) / sum(present.values()) if present else None
    )
    return groups


def official_groups(per_category: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """The official summary groups with the official rule: an absent category counts as 0."""

    def accuracy(category: str) -> float:
        row = per_category.get(category)
        return row["accuracy"] if row else 0.0

    def count(category: str) -> int:
        row = per_category.get(category)
        return row["total"] if row else OFFICIAL_ENTRY_COUNTS[category]

    def mean(categories: Sequence[str]) -> float:
        return sum(accuracy(c) for c in categories) / len(categories)

    simple = mean(SIMPLE)
    non_live = (simple + sum(accuracy(c) for c in NON_LIVE_AST)) / (1 + len(NON_LIVE_AST))
    live_total = sum(count(c) for c in LIVE_AST)
    web_search, memory = mean(WEB_SEARCH), mean(MEMORY)
    groups = {
        "simple": simple,
        "non_live": non_live,
        "live": sum(accuracy(c) * count(c) for c in LIVE_AST) / live_total,  # counts are never 0
        "irrelevance": mean(IRRELEVANCE),
        "relevance": accuracy("live_relevance"),
        "multi_turn": mean(MULTI_TURN),
        "web_search": web_search,
        "memory": memory,
        "agentic": (web_search + memory) / 2,
    }
    weights = sum(OVERALL_WEIGHTS.values())
    groups["overall"] = sum(w * groups[g] for g, w in OVERALL_WEIGHTS.items()) / weights
    return groups


def weighted_accuracy(
    per_category: Mapping[str, Mapping[str, Any]], weights: Mapping[str, float] | None = None
) -> float | None:
    """sum(w_c * acc_c) / sum(w_c) over present categories with a weight; None if none."""
    if weights is None:
        weights = {category: 1.0 for category in per_category}
    negative = sorted(category for category, weight in weights.items() if weight < 0)
    if negative:
        raise ValueError(f"BFCL category weights must be >= 0: {', '.join(negative)}")
    used = {c: w for c, w in weights.items() if c in per_category}
    numerator = sum(w * per_category[c]["accuracy"] for c, w in used.items())
    return _rate(numerator, sum(used.values()))


def relevance_detection(results: Sequence[BfclItemResult]) -> dict[str, float | int | None]:
    """Call detection as binary classification: positive = a call is expected. Over the
    single-turn categories only (a multi-turn entry expects calls in most turns)."""
    results = [r for r in results if r.category in CATEGORIES]
    tp = sum(r.expected_call and r.predicted_call for r in results)
    fp = sum(not r.expected_call and r.predicted_call for r in results)
    fn = sum(r.expected_call and not r.predicted_call for r in results)
    tn = len(results) - tp - fp - fn
    precision, recall = _rate(tp, tp + fp), _rate(tp, tp + fn)
    return {
        "precision": precision,
        "recall": recall,
        "f1": None if precision is None or recall is None else _f1(precision, recall),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
    }


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def error_type_counts(results: Sequence[BfclItemResult]) -> dict[str, int]:
    """Invalid items per official error type, most frequent first."""
    counts = Counter(r.error_type for r in results if not r.valid and r.error_type)
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))
