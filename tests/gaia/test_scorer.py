"""The GAIA scorer gives the official leaderboard verdict, case by case.

Every expected value in the tables is also checked against the vendored
official scorer (``official_scorer.py``), so a wrong expectation cannot hide.
"""

from __future__ import annotations

import random
import warnings

import pytest

from pytest_agenteval.tasks.gaia import ScoreResult, question_scorer, score_with_reason

from .official_scorer import question_scorer as official_question_scorer

# (ground truth, model answer, official verdict)
NUMBER_CASES = [
    ("17", "17", True),
    ("17", " 17 ", True),
    (" 17 ", "17", True),
    ("17", "17.0", True),
    ("17", "17.", True),
    ("17", "+17", True),
    ("17", "17 apples", False),
    ("17", "seventeen", False),
    ("17", "**17**", False),
    ("17", "", False),
    ("1000", "$1,000", True),
    ("1000", "1,000", True),
    ("1000", "1e3", True),
    ("1e3", "1000", True),
    ("1000", "1.000", False),
    ("1000", "1000 dollars", False),
    ("50", "50%", True),
    ("100", "100 %", True),
    ("0.5", ".5", True),
    ("0.5", "1/2", False),
    ("3.14", "3.14159", False),
    ("-5", "-5", True),
    ("-5", "\u22125", False),  # Unicode minus sign: float() rejects it
    ("17", "1_7", True),  # float() accepts digit separators
    ("17", "\u0661\u0667", True),  # float() accepts Arabic-Indic digits
    ("nan", "nan", False),  # nan never equals itself
    ("inf", "whatever", True),  # an unparsable answer becomes inf
]

LIST_CASES = [
    ("a, b, c", "a, b, c", True),
    ("a, b, c", "A,B ,C", True),
    ("a, b, c", "c, b, a", False),  # compared in order
    ("a; b; c", "a, b; c", True),  # both separators split
    ("a, b, c", "a, b", False),  # lengths differ
    ("a, b", "a, b, c", False),
    ("1, 2, 3", "1, 2.0, $3", True),  # float elements by the number rule
    ("1, 2, 3", "1, 2, three", False),
    ("Dr. Who, Amy", "dr who, amy", False),  # punctuation kept inside lists
    ("Dr. Who, Amy", "DR.WHO, amy", True),
    ("1,000", "1000", False),  # "1,000" is not a float: list path, 2 vs 1 elements
    ("1,000", "1,000", True),
    ("1,000", "1, 000", True),
    ("a, b,", "a, b,", True),  # empty trailing elements compare as ""
    ("a, b", None, False),  # None -> "None": one element
    ("a, a, b", "a, b, b", False),
    ("1, $1", "$1, 1", False),
]

STRING_CASES = [
    ("United States", "The United States", False),  # articles are NOT removed
    ("United States", "united states", True),
    ("United States", "UnitedStates", True),
    ("St. Petersburg", "StPetersburg!", True),
    ("St. Petersburg", "Saint Petersburg", False),
    ("sea gull", "seagull", True),
    ("Paris", "Paris.", True),
    ("Paris", "[Paris]", True),  # brackets are punctuation
    ("Paris", "Paris, France", False),
    ("it's", "it\u2019s", False),  # the curly quote is not ASCII punctuation
    ("it\u2019s", "It\u2019s", True),
    ("café", "cafe", False),
    ("Tokyo", "東京", False),
    ("Paris", None, False),
    ("None", None, True),  # a None answer is scored as the string "None"
]

ALL_CASES = NUMBER_CASES + LIST_CASES + STRING_CASES


def _official(answer: str | None, truth: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return official_question_scorer(answer, truth)


@pytest.mark.parametrize(("truth", "answer", "expected"), ALL_CASES)
def test_question_scorer_matches_table(truth: str, answer: str | None, expected: bool) -> None:
    assert question_scorer(answer, truth) is expected


@pytest.mark.parametrize(("truth", "answer", "expected"), ALL_CASES)
def test_table_expectations_are_the_official_verdicts(truth: str, answer: str | None, expected: bool) -> None:
    assert _official(answer, truth) is expected


@pytest.mark.parametrize(
    ("truth", "answer", "rule"),
    [
        ("17", "x", "number"),
        ("1e3", "x", "number"),
        ("a, b", "x", "list"),
        ("1,000", "x", "list"),
        ("a; b", "x", "list"),
        ("Paris", "x", "string"),
    ],
)
def test_rule_is_chosen_by_the_ground_truth(truth: str, answer: str, rule: str) -> None:
    assert score_with_reason(answer, truth).rule == rule


@pytest.mark.parametrize(
    ("truth", "answer", "expected"),
    [
        ("a, b, c", "c, b, a", True),
        ("a, b, c", "C; A; B", True),
        ("a, b, c", "a, b", False),
        ("a, a, b", "a, b, b", False),  # a multiset, not a set
        ("a, a, b", "b, a, a", True),
        ("1, 2, 3", "$3, 2.0, 1", True),
        ("1, $1", "$1, 1", True),  # needs a real matching: "$1" fits both elements
        ("1, $1", "1, 1", False),
        ("Dr. Who, Amy", "amy, dr who", False),  # punctuation still kept
    ],
)
def test_unordered_lists_option(truth: str, answer: str, expected: bool) -> None:
    assert question_scorer(answer, truth, unordered_lists=True) is expected


@pytest.mark.parametrize(
    ("truth", "answer"), [("17", "17"), ("Paris", "paris"), ("Paris", "Rome"), ("5", "x")]
)
def test_unordered_option_does_not_change_numbers_or_strings(truth: str, answer: str) -> None:
    assert question_scorer(answer, truth, unordered_lists=True) is question_scorer(answer, truth)


@pytest.mark.parametrize(
    ("answer", "truth", "correct", "rule", "reason"),
    [
        ("17 apples", "17", False, "number", "'17 apples' -> not a number (inf), expected 17.0"),
        ("$1,000", "1000", True, "number", "'$1,000' -> 1000.0 == 1000.0"),
        ("a, b", "a, b, c", False, "list", "answer has 2 element(s), ground truth has 3"),
        ("a, x, c", "a, b, c", False, "list", "element 2: 'x' does not match 'b'"),
        ("A,B", "a, b", True, "list", "all 2 elements match in order"),
        ("The USA", "USA", False, "string", "normalised 'theusa' != 'usa'"),
        ("St Petersburg", "St. P", False, "string", "normalised 'stpetersburg' != 'stp'"),
        ("StPetersburg!", "St. Petersburg", True, "string", "normalised 'stpetersburg' == 'stpetersburg'"),
    ],
)
def test_score_with_reason_explains_the_verdict(
    answer: str, truth: str, correct: bool, rule: str, reason: str
) -> None:
    assert score_with_reason(answer, truth) == ScoreResult(correct, rule, reason)  # type: ignore[arg-type]


def test_unordered_failure_names_the_unmatched_element() -> None:
    result = score_with_reason("a, b, b", "a, a, b", unordered_lists=True)
    assert result == ScoreResult(False, "list", "unordered: no answer element left to match 'a'")


@pytest.mark.parametrize(
    ("answer", "truth", "expected"),
    [
        (17, "17", True),
        (17.0, "17", True),
        (0.5, "0.5", True),
        (["a"], "a", True),  # "['a']" minus punctuation is "a"
        (["a", "b"], "a, b", False),  # "['a'" keeps its punctuation in a list
    ],
)
def test_non_string_answers_are_coerced_with_str(answer: object, truth: str, expected: bool) -> None:
    assert question_scorer(answer, truth) is expected


@pytest.mark.parametrize(("truth", "answer", "expected"), [(17, "17", True), (0.5, "1/2", False)])
def test_non_string_ground_truth_is_coerced_with_str(truth: object, answer: str, expected: bool) -> None:
    assert question_scorer(answer, truth) is expected  # type: ignore[arg-type]


def test_missing_ground_truth_is_refused() -> None:
    with pytest.raises(ValueError, match="no ground truth to score against"):
        score_with_reason("17", None)  # type: ignore[arg-type]


def test_list_length_mismatch_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert question_scorer("a", "a, b") is False


# --- agreement with the official scorer on generated pairs -------------------

_PIECES = [
    "17",
    "1000",
    "1,000",
    "0.5",
    ".5",
    "1e3",
    "-3",
    "42.0",
    "$",
    "%",
    ",",
    ";",
    " ",
    "  ",
    "a",
    "B",
    "Paris",
    "the",
    "St.",
    "it's",
    "it\u2019s",
    "!",
    "?",
    "-",
    "(x)",
    "[",
    "]",
    "\t",
    "\n",
    "é",
    "東",
    "inf",
    "nan",
    "None",
    "_",
    "+",
    "/",
    "apples",
]


def _random_text(rng: random.Random) -> str:
    return "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 5)))


def _mutate(rng: random.Random, text: str) -> str:
    """A near miss of ``text``: case, spacing, punctuation, separators, order."""
    choice = rng.randrange(7)
    if choice == 0:
        return text.upper()
    if choice == 1:
        return text.replace(" ", rng.choice(["", "  ", "\t"]))
    if choice == 2:
        return text + rng.choice([".", "!", " ", ",", ";", "%", "$"])
    if choice == 3:
        return text.replace(",", rng.choice([";", ", ", ""]))
    if choice == 4:
        return ",".join(reversed(text.split(",")))
    if choice == 5:
        return rng.choice(["$", "", " "]) + text
    return _random_text(rng)


def test_agrees_with_official_scorer_on_generated_pairs() -> None:
    rng = random.Random(20240607)
    disagreements = []
    for _ in range(20000):
        truth = _random_text(rng)
        answer = _mutate(rng, truth) if rng.random() < 0.7 else _random_text(rng)
        if _official(answer, truth) is not question_scorer(answer, truth):
            disagreements.append((answer, truth))
    assert disagreements == []


def test_generated_pairs_cover_every_rule_and_both_verdicts() -> None:
    rng = random.Random(20240607)
    seen = set()
    for _ in range(20000):
        truth = _random_text(rng)
        answer = _mutate(rng, truth) if rng.random() < 0.7 else _random_text(rng)
        result = score_with_reason(answer, truth)
        seen.add((result.rule, result.correct))
    assert seen == {(rule, verdict) for rule in ("number", "list", "string") for verdict in (True, False)}
