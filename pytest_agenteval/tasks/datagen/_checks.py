"""Judge-free evidence: the AIME answer format and near-duplicates of the reference set."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_agenteval.tasks.datagen._stats import _ratio, wilson

NEAR_DUPLICATE_JACCARD = 0.5
SHINGLE = 5
_INTEGER = re.compile(r"[+-]?\d+")
_BOXED = re.compile(r"^\\boxed\{(.*)\}$")


def answer_format(answer: str) -> dict[str, Any]:
    """AIME answers are integers 0-999. `\\boxed{12}` and `$12$` unwrap; "042" is 42
    (AIME writes three digits); "3.5", "1000" and "-1" fail with the reason."""
    text = answer.strip().strip("$").strip()
    match = _BOXED.match(text)
    if match:
        text = match.group(1).strip()
    if not _INTEGER.fullmatch(text):
        return {"ok": False, "value": None, "reason": f"{answer!r} is not an integer"}
    value = int(text)
    if not 0 <= value <= 999:
        return {"ok": False, "value": value, "reason": f"{value} is outside 0-999"}
    return {"ok": True, "value": value, "reason": ""}


def shingles(text: str, size: int = SHINGLE) -> set[str]:
    normalised = re.sub(r"\s+", " ", text.lower()).strip()
    if len(normalised) <= size:
        return {normalised} if normalised else set()
    return {normalised[i : i + size] for i in range(len(normalised) - size + 1)}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def nearest_reference(problem: str, references: Sequence[tuple[str, set[str]]]) -> dict[str, Any]:
    """The most similar reference problem by character 5-gram Jaccard."""
    own = shingles(problem)
    best_id, best = None, 0.0
    for ref_id, ref_shingles in references:
        score = jaccard(own, ref_shingles)
        if score > best:
            best_id, best = ref_id, score
    return {
        "nearest_reference": best_id,
        "jaccard": round(best, 6),
        "near_duplicate": best >= NEAR_DUPLICATE_JACCARD,
    }


def checks_summary(items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """`items`: each item's `checks` field."""
    formatted = sum(bool(i["answer_format"]["ok"]) for i in items)
    duplicates = [i["id"] for i in items if i["duplicate"]["near_duplicate"]]
    solved = [i["solve"] for i in items if i.get("solve")]
    summary: dict[str, Any] = {
        "items": len(items),
        "answer_format_rate": _ratio(formatted, len(items)),
        "answer_format_ci95": wilson(formatted, len(items)),
        "bad_answers": [i["id"] for i in items if not i["answer_format"]["ok"]],
        "near_duplicates": len(duplicates),
        "near_duplicate_ids": duplicates,
        "near_duplicate_threshold": NEAR_DUPLICATE_JACCARD,
    }
    if solved:
        agree = sum(s["majority_agrees"] for s in solved)
        samples = sum(s["samples"] for s in solved)
        summary["solve"] = {
            "items": len(solved),
            "answer_agreement_rate": _ratio(agree, len(solved)),
            "answer_agreement_ci95": wilson(agree, len(solved)),
            "solve_rate": _ratio(sum(s["correct"] for s in solved), samples),
            "formatted_rate": _ratio(sum(s["formatted"] for s in solved), samples),
        }
    return summary
