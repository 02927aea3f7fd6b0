"""GAIA's official quasi-exact-match scorer, reimplemented with reasons.

The rules are those of the leaderboard Space's ``scorer.py`` (mirrored in
smolagents' ``gaia_scorer.py`` and GPTSwarm), read line by line:

* **number** -- the ground truth parses with ``float()``: delete every ``$``,
  ``%`` and ``,`` from the answer, ``float()`` it (``inf`` when that fails) and
  compare with ``==``. No tolerance, no unit stripping: ``"17 apples"`` fails.
* **list** -- otherwise, when the ground truth contains ``,`` or ``;``: split
  both on ``[,;]``; different lengths fail; elements are compared *in order*,
  a float ground-truth element by the number rule, any other element with all
  whitespace removed and lowercased, punctuation kept.
* **string** -- otherwise: remove all whitespace, lowercase, remove ASCII
  ``string.punctuation``. Articles are *not* removed.

Deliberate differences from the official code, none of which change a verdict
on a ``str`` answer: a ``None`` answer becomes ``"None"`` (as newer official
revisions do), any other non-``str`` answer is coerced with ``str()`` instead
of crashing, and nothing is printed or warned. ``unordered_lists=True`` is an
opt-in variant (the design documents' "sorted" reading): a list answer is correct when
*some* ordering of its elements passes the in-order comparison.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Literal

Rule = Literal["number", "list", "string"]

_LIST_SEPARATORS = re.compile("[,;]")
_WHITESPACE = re.compile(r"\s")
_PUNCTUATION_TABLE = str.maketrans("", "", string.punctuation)


@dataclass(frozen=True)
class ScoreResult:
    """One verdict: which official rule applied, and why it passed or failed."""

    correct: bool
    rule: Rule
    reason: str


def is_float(text: str) -> bool:
    """True when ``float(text)`` succeeds (so ``" 17 "``, ``"1e3"``, ``"nan"``)."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def _parse_number(text: str) -> float | None:
    for char in ("$", "%", ","):
        text = text.replace(char, "")
    try:
        return float(text)
    except ValueError:
        return None


def normalize_number_str(text: str) -> float:
    """Official number normalisation: drop ``$ % ,`` then ``float()``, ``inf`` on failure."""
    number = _parse_number(text)
    return float("inf") if number is None else number


def normalize_str(text: str, *, remove_punct: bool = True) -> str:
    """Official string normalisation: no whitespace, lowercase, optionally no punctuation."""
    no_spaces = _WHITESPACE.sub("", text).lower()
    return no_spaces.translate(_PUNCTUATION_TABLE) if remove_punct else no_spaces


def split_list(text: str) -> list[str]:
    """Official list split: ``re.split("[,;]", text)`` (empty pieces are kept)."""
    return _LIST_SEPARATORS.split(text)


def question_scorer(
    model_answer: object,
    ground_truth: str,
    *,
    unordered_lists: bool = False,
) -> bool:
    """The official GAIA verdict for one answer (see the module docstring)."""
    return score_with_reason(model_answer, ground_truth, unordered_lists=unordered_lists).correct


def score_with_reason(
    model_answer: object,
    ground_truth: str,
    *,
    unordered_lists: bool = False,
) -> ScoreResult:
    """Like :func:`question_scorer`, with the rule used and a readable reason.

    Raises ValueError when ``ground_truth`` is None (a test-split task).
    """
    if ground_truth is None:
        raise ValueError("no ground truth to score against (test-split tasks have no answer)")
    answer = "None" if model_answer is None else str(model_answer)
    truth = str(ground_truth)
    if is_float(truth):
        return _score_number(answer, truth)
    if "," in truth or ";" in truth:
        return _score_list(answer, truth, unordered=unordered_lists)
    return _score_string(answer, truth)


def _score_number(answer: str, truth: str) -> ScoreResult:
    parsed, want = _parse_number(answer), float(truth)
    got = float("inf") if parsed is None else parsed
    shown = "not a number (inf)" if parsed is None else repr(got)
    if got == want:
        return ScoreResult(True, "number", f"{answer!r} -> {shown} == {want!r}")
    return ScoreResult(False, "number", f"{answer!r} -> {shown}, expected {want!r}")


def _element_matches(answer_elem: str, truth_elem: str) -> bool:
    if is_float(truth_elem):
        return normalize_number_str(answer_elem) == float(truth_elem)
    return normalize_str(answer_elem, remove_punct=False) == normalize_str(truth_elem, remove_punct=False)


def _score_list(answer: str, truth: str, *, unordered: bool) -> ScoreResult:
    answer_elems, truth_elems = split_list(answer), split_list(truth)
    if len(answer_elems) != len(truth_elems):
        return ScoreResult(
            False,
            "list",
            f"answer has {len(answer_elems)} element(s), ground truth has {len(truth_elems)}",
        )
    if unordered:
        return _score_list_unordered(answer_elems, truth_elems)
    for index, (got, want) in enumerate(zip(answer_elems, truth_elems, strict=True), start=1):
        if not _element_matches(got, want):
            return ScoreResult(
                False, "list", f"element {index}: {got.strip()!r} does not match {want.strip()!r}"
            )
    return ScoreResult(True, "list", f"all {len(truth_elems)} elements match in order")


def _score_list_unordered(answer_elems: list[str], truth_elems: list[str]) -> ScoreResult:
    """Correct iff a one-to-one pairing of elements exists (bipartite matching)."""
    candidates = [
        [a for a, got in enumerate(answer_elems) if _element_matches(got, want)] for want in truth_elems
    ]
    owner: dict[int, int] = {}  # answer index -> truth index

    def assign(t: int, seen: set[int]) -> bool:
        for a in candidates[t]:
            if a in seen:
                continue
            seen.add(a)
            if a not in owner or assign(owner[a], seen):
                owner[a] = t
                return True
        return False

    for t, want in enumerate(truth_elems):
        if not assign(t, set()):
            return ScoreResult(False, "list", f"unordered: no answer element left to match {want.strip()!r}")
    return ScoreResult(True, "list", f"all {len(truth_elems)} elements match (unordered)")


def _score_string(answer: str, truth: str) -> ScoreResult:
    got, want = normalize_str(answer), normalize_str(truth)
    if got == want:
        return ScoreResult(True, "string", f"normalised {got!r} == {want!r}")
    return ScoreResult(False, "string", f"normalised {got!r} != {want!r}")
