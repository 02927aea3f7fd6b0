"""The AIME answer rules, case by case, with the seed lab's semantics (eval.py and
reward.py; SPEC section 4). tests/aime25/test_lab_parity.py runs the lab's own code on
hundreds more; these pin the exact values a reader can check by eye."""

from __future__ import annotations

import pytest

from pytest_agenteval.scorers import (
    extract_last_boxed,
    extract_reward_boxed,
    normalize_aime_answer,
    score_boxed_integer,
    score_math_verify_tail,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("$\\mathrm{007}$", "7"),
        ("21+21", None),
        ("42.0", None),
        ("70", "70"),
        (" 70 ", "70"),
        ("-5", "-5"),
        ("+4", "4"),
        ("1,000", "1000"),
        ("\\$100", None),  # the backslash stays: not an integer
        ("$100$", "100"),
        ("\\text{588}", "588"),
        ("\\mathrm{16}", "16"),
        ("\\text{\\mathrm{16}}", None),  # the inner one is unwrapped, the outer has braces left
        ("\\text{ 5 }", "5"),  # inner whitespace allowed
        ("\\mathrm {7}", "7"),  # whitespace before the brace too
        ("\\text{4}\\text{2}", "42"),  # every wrapper is unwrapped
        ("\\frac{1}{2}", None),
        ("", None),
        (None, None),
        ("x = 5", None),
    ],
)
def test_normalize_aime_answer(raw: str | None, expected: str | None) -> None:
    assert normalize_aime_answer(raw) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is \\boxed{70}.", "70"),
        ("\\boxed{1} then \\boxed{2}", "2"),
        ("nested \\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("deep \\boxed{a{b{c}}d}", "a{b{c}}d"),
        ("last unclosed: \\boxed{12} and \\boxed{13", "12"),
        ("spaced \\boxed {42}", "42"),
        ("\\boxed\\text{42}", "42"),  # anything may sit between \boxed and the brace
        ("\\boxed{ 42 }", "42"),  # stripped
        ("no box here", None),
        ("\\boxed{unclosed", None),
        ("\\boxed", None),
        ("\\boxed{}", ""),
    ],
)
def test_extract_last_boxed(text: str, expected: str | None) -> None:
    assert extract_last_boxed(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\\boxed{42}", "42"),
        ("\\boxed{ 42 }", " 42 "),  # not stripped here; the reward strips before verifying
        ("\\boxed {42}", None),  # only the exact `\boxed{`
        ("\\boxed{42} then \\boxed{41", None),  # the last one decides, unclosed: no answer
    ],
)
def test_extract_reward_boxed(text: str, expected: str | None) -> None:
    assert extract_reward_boxed(text) == expected


@pytest.mark.parametrize(
    ("text", "truth", "correct", "formatted", "predicted"),
    [
        ("so \\boxed{70}", "70", True, True, "70"),
        ("so \\boxed{$\\mathrm{007}$}", "7", True, True, "7"),
        ("so \\boxed{21+21}", "42", False, True, None),
        ("so \\boxed{42.0}", "42", False, True, None),
        ("so \\boxed{\\text{ 42 }}", "42", True, True, "42"),
        ("so \\boxed{\\frac{84}{2}}", "42", False, True, None),
        ("so 42", "42", False, False, None),
        ("\\boxed{41} wait, \\boxed{42}", "42", True, True, "42"),
        ("\\boxed{42} then \\boxed{41", "42", True, True, "42"),
    ],
)
def test_boxed_integer_score(text: str, truth: str, correct: bool, formatted: bool, predicted) -> None:
    score = score_boxed_integer(text, truth)
    assert (score.correct, score.formatted, score.fields["predicted_answer"]) == (
        correct,
        formatted,
        predicted,
    )


@pytest.mark.parametrize(
    ("text", "truth", "correct", "formatted", "disagree"),
    [
        ("The answer is \\boxed{70}.", "70", True, True, False),
        ("The answer is \\boxed{\\frac{140}{2}}.", "70", True, True, True),
        ("The answer is \\boxed{071}.", "70", False, True, False),
        ("The answer is \\boxed{42.}", "42", True, True, True),  # math-verify reads 42.
        ("The answer is \\boxed{The answer is 42}", "42", True, True, True),
        ("\\boxed{70}" + "x" * 400, "70", False, False, True),  # outside the last 300 chars
        ("The answer is \\boxed {70}.", "70", False, False, True),  # the reward rule wants `\boxed{`
        ("no answer", "70", False, False, False),
    ],
)
def test_math_verify_tail_score(
    text: str, truth: str, correct: bool, formatted: bool, disagree: bool
) -> None:
    score = score_math_verify_tail(text, truth)
    assert (score.correct, score.formatted, score.fields["scorers_disagree"]) == (
        correct,
        formatted,
        disagree,
    )


def test_math_verify_tail_refuses_to_run_off_the_main_thread() -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        with pytest.raises(RuntimeError, match="main thread"):
            pool.submit(score_math_verify_tail, "\\boxed{1}", "1").result()


@pytest.mark.parametrize(
    ("boxed", "vote"),
    [
        ("42", "42"),
        ("42.0", "42"),
        ("\\text{42}", "42"),
        ("0042", "42"),
        ("3.5", "3.5"),
        ("\\frac{1}{2}", "\\frac{1}{2}"),
    ],
)
def test_math_verify_tail_votes_on_normalised_answers(boxed: str, vote) -> None:
    assert score_math_verify_tail(f"so \\boxed{{{boxed}}}", "42").answer == vote
