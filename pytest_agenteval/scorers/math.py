"""AIME answers, exactly as the ReTool lab's evaluator scores them (its eval.py and reward.py):
the text-only integer rule and the ReTool reward rule (math-verify on the tail)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from importlib import metadata
from typing import Any

from pytest_agenteval.api.records import Score

REWARD_TAIL_CHARS = 300  # reward.py ANSWER_WINDOW_CHARS: only the end of the answer counts
_WRAPPER = re.compile(r"\\(?:text|mathrm)\s*\{([^{}]*)\}")
_SIGNED_INT = re.compile(r"\s*([+-]?\d+)\s*")


def extract_last_boxed(text: str) -> str | None:
    """eval.py `extract_last_boxed`: from the last `\\boxed`, the next `{` (any characters
    may sit between them), brace-balanced; an unclosed one falls back to an earlier
    `\\boxed`. The content is stripped."""
    end = len(text)
    while True:
        start = text.rfind("\\boxed", 0, end)
        if start < 0:
            return None
        left = text.find("{", start)
        if left < 0:
            end = start
            continue
        content = _balanced(text, left)
        if content is not None:
            return content.strip()
        end = start


def _balanced(text: str, open_at: int) -> str | None:
    """Content of the brace group opening at `open_at`, or None when it never closes."""
    depth = 0
    for position in range(open_at, len(text)):
        char = text[position]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : position]
    return None


def normalize_aime_answer(answer: str | None) -> str | None:
    """eval.py `normalize_aime_answer`: strip, drop `,` and `$`, unwrap every
    `\\text{}`/`\\mathrm{}` (whitespace allowed before `{`), then a signed integer with
    optional surrounding whitespace, as a string without leading zeros.
    `$\\mathrm{007}$` -> "7", `\\text{ 42 }` -> "42", `42.0` -> None."""
    if answer is None:
        return None
    cleaned = answer.strip().replace(",", "").replace("$", "")
    cleaned = _WRAPPER.sub(r"\1", cleaned)
    match = _SIGNED_INT.fullmatch(cleaned)
    if match is None:
        return None
    return str(int(match.group(1)))


def score_boxed_integer(text: str, ground_truth: Any) -> Score:
    """Text-only rule: the normalised last boxed answer equals the normalised truth.
    Formatted = a boxed answer was found at all."""
    boxed = extract_last_boxed(text)
    predicted = normalize_aime_answer(boxed)
    expected = normalize_aime_answer(str(ground_truth))
    return Score(
        correct=predicted is not None and predicted == expected,
        formatted=boxed is not None,
        answer=predicted,
        fields={"predicted_answer": predicted, "boxed_answer": boxed, "scorer": "boxed-integer"},
    )


def extract_reward_boxed(text: str) -> str | None:
    """reward.py `extract_last_boxed`: the last exact `\\boxed{`, brace-balanced; an
    unclosed one is no answer (no fallback)."""
    index = text.rfind("\\boxed{")
    if index < 0:
        return None
    return _balanced(text, index + len("\\boxed"))


def _require_main_thread() -> None:
    # math-verify's timeout is SIGALRM: off the main thread it raises, and a thread-pool
    # workaround would silently disable the timeout.
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("math-verify must run on the main thread (its timeout is SIGALRM)")


def answers_equivalent(prediction: str, reference: str) -> bool:
    """reward.py `answers_equivalent`: math-verify on `$reference$` and `$prediction$`
    with the library defaults; any exception is "not equivalent"."""
    from math_verify import parse, verify

    _require_main_thread()
    try:
        return bool(verify(parse(f"${reference}$"), parse(f"${prediction}$")))
    except Exception:  # math-verify raises on odd input: the lab scores that as wrong
        return False


def score_math_verify_tail(text: str, ground_truth: Any) -> Score:
    """ReTool reward rule (reward.py `score_answer`): in the last 300 characters, the last
    `\\boxed{` decides, by math-verify against the truth. The full-text integer extraction
    (what the lab records as `predicted_answer`) is kept beside it, flagged on disagreement."""
    content = extract_reward_boxed(text[-REWARD_TAIL_CHARS:])
    correct = content is not None and answers_equivalent(content.strip(), str(ground_truth).strip())
    display = score_boxed_integer(text, ground_truth)
    return Score(
        correct=correct,
        formatted=content is not None,
        answer=_vote_key(content, display.fields["predicted_answer"]),
        fields={
            "predicted_answer": display.fields["predicted_answer"],
            "boxed_answer": display.fields["boxed_answer"],
            "reward_boxed": content,
            "scorers_disagree": display.correct != correct,
            "scorer": "math-verify-tail",
        },
    )


def _vote_key(content: str | None, integer: str | None) -> Any:
    """What maj@N votes on: the integer when the answer is one (`42`, `42.0`, `\\text{42}`
    alike), else the boxed content without spaces."""
    if content is None:
        return None
    if integer is not None:
        return integer
    try:
        number = float(content.replace(",", ""))
    except ValueError:
        return "".join(content.split())
    return str(int(number)) if number.is_integer() else str(number)


MATH_SCORERS: dict[str, Callable[[str, Any], Score]] = {
    "boxed-integer": score_boxed_integer,
    "math-verify-tail": score_math_verify_tail,
}


def math_verify_version() -> str:
    try:
        return metadata.version("math-verify")
    except metadata.PackageNotFoundError:  # pragma: no cover
        return "not installed"
