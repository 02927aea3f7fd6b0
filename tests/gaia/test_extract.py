"""Answer extraction: FINAL ANSWER, then answer labels, then the last line."""

from __future__ import annotations

import pytest

from pytest_agenteval.tasks.gaia import ExtractedAnswer, clean_answer, extract_final_answer


@pytest.mark.parametrize(
    ("raw", "answer"),
    [
        ("Let me think.\nFINAL ANSWER: 42", "42"),
        ("final answer: Paris", "Paris"),
        ("Final Answer:Paris", "Paris"),
        ("FINAL ANSWER: 1\nOn reflection...\nFINAL ANSWER: 2", "2"),
        ("FINAL ANSWER: 7\nThis is because 3 + 4 = 7.", "7"),
        ("FINAL ANSWER: [Paris]", "Paris"),
        ("FINAL ANSWER: [1, 2, 3]", "1, 2, 3"),
        ("FINAL ANSWER: [a], [b]", "[a], [b]"),
        ("FINAL ANSWER:   Saint Petersburg   ", "Saint Petersburg"),
        ("FINAL ANSWER:\n\n  Paris  \nmore text", "Paris"),
        ("**FINAL ANSWER:** Paris", "Paris"),
        ("**FINAL ANSWER**: `42`", "42"),
        ("FINAL ANSWER: **42**", "42"),
        ("FINAL ANSWER: __blue, green__", "blue, green"),
        ("FINAL ANSWER：42", "42"),
        ("final_answer: 7", "7"),
        ("FINAL ANSWER: 5\nwait\nFINAL ANSWER:", "5"),
        ("FINAL ANSWER: 1\nAnswer: 2", "1"),
        ("The template says FINAL ANSWER: [YOUR FINAL ANSWER]\nFINAL ANSWER: 3", "3"),
    ],
)
def test_final_answer_template(raw: str, answer: str) -> None:
    assert extract_final_answer(raw) == ExtractedAnswer(answer, "final_answer", raw)


@pytest.mark.parametrize(
    ("raw", "answer"),
    [
        ("Working...\nAnswer: 12", "12"),
        ("answer: twelve", "twelve"),
        ("**Answer:** 12", "12"),
        ("Answer：12", "12"),
        ("推理过程……\n答案：北京", "北京"),
        ("答案: 4", "4"),
        ("最终答案：3", "3"),
        ("最终答案:5", "5"),
        ("Answer: 1\nmore\nAnswer: 2", "2"),
        ("Answer:\n  [Rome]\n", "Rome"),
    ],
)
def test_answer_labels(raw: str, answer: str) -> None:
    assert extract_final_answer(raw) == ExtractedAnswer(answer, "answer_label", raw)


def test_answer_label_needs_a_word_boundary() -> None:
    assert extract_final_answer("reanswer: 3").method == "last_line"


@pytest.mark.parametrize(
    ("raw", "answer"),
    [
        ("I believe it is\nParis", "Paris"),
        ("foo\n\nbar  \n\n", "bar"),
        ("  [17]  ", "17"),
        ("just one line", "just one line"),
        ("The answer is 5", "The answer is 5"),
    ],
)
def test_last_non_empty_line(raw: str, answer: str) -> None:
    assert extract_final_answer(raw) == ExtractedAnswer(answer, "last_line", raw)


@pytest.mark.parametrize("raw", ["", "   \n\t\n"])
def test_empty_output_has_no_answer(raw: str) -> None:
    assert extract_final_answer(raw) == ExtractedAnswer(None, "none", raw)


def test_none_output_has_no_answer() -> None:
    assert extract_final_answer(None) == ExtractedAnswer(None, "none", "")


def test_raw_output_is_kept_untouched() -> None:
    raw = "  thoughts\r\nFINAL ANSWER: [x]  \r\n"
    result = extract_final_answer(raw)
    assert (result.answer, result.raw) == ("x", raw)


@pytest.mark.parametrize(
    ("text", "cleaned"),
    [
        ("  x  ", "x"),
        ("[x]", "x"),
        ("[[x]]", "[[x]]"),
        ("**[x]**", "x"),
        ("`x`", "x"),
        ("x.", "x."),
        ("[]", ""),
        ("*", ""),
    ],
)
def test_clean_answer(text: str, cleaned: str) -> None:
    assert clean_answer(text) == cleaned
