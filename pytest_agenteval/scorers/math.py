"""AIME answers: the text-only integer rule and the ReTool reward rule (math-verify)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from importlib import metadata
from typing import Any

from ..records import Score

_BOXED = re.compile(r"\\boxed")
_WRAPPER = re.compile(r"^\\(?:text|mathrm)\{(.*)\}$", re.DOTALL)
_SIGNED_INT = re.compile(r"[+-]?\d+")
REWARD_TAIL_CHARS = 300


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


def extract_last_boxed(text: str) -> str | None:
    """Content of the last brace-balanced `\\boxed{...}`; when the last one is unclosed,
    fall back to an earlier one. Whitespace between `\\boxed` and `{` is allowed."""
    for match in reversed(list(_BOXED.finditer(text))):
        position = match.end()
        while position < len(text) and text[position].isspace():
            position += 1
        if position < len(text) and text[position] == "{":
            content = _balanced(text, position)
            if content is not None:
                return content
    return None


def normalize_integer_answer(raw: str | None) -> int | None:
    """The seed's rule: strip, drop `,` and `$`, unwrap one `\\text{}`/`\\mathrm{}`, then
    the whole string must be a signed integer. `$\\mathrm{007}$` -> 7, `42.0` -> None."""
    if raw is None:
        return None
    text = raw.strip().replace(",", "").replace("$", "")
    wrapped = _WRAPPER.match(text)
    if wrapped:
        text = wrapped.group(1)
    if not _SIGNED_INT.fullmatch(text):
        return None
    return int(text)


def score_boxed_integer(text: str, ground_truth: Any) -> Score:
    """Text-only rule: the last boxed answer, normalised to an integer, equals the truth.
    Formatted = a boxed answer was found at all."""
    boxed = extract_last_boxed(text)
    predicted = normalize_integer_answer(boxed)
    expected = normalize_integer_answer(str(ground_truth))
    correct = predicted is not None and predicted == expected
    return Score(
        correct=correct,
        formatted=boxed is not None,
        answer=predicted,
        fields={"predicted_answer": predicted, "boxed_answer": boxed, "scorer": "boxed-integer"},
    )


def _require_main_thread() -> None:
    # math-verify's timeout is SIGALRM: off the main thread it raises, and a thread-pool
    # workaround would silently disable the timeout.
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("math-verify must run on the main thread (its timeout is SIGALRM)")


def score_math_verify_tail(text: str, ground_truth: Any, timeout_s: int = 5) -> Score:
    """ReTool reward rule: in the last 300 characters, from the last exact `\\boxed{`,
    math-verify decides equivalence with the ground truth. The full-text integer
    extraction is recorded beside it, with a flag when the two disagree."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    _require_main_thread()
    tail = text[-REWARD_TAIL_CHARS:]
    start = tail.rfind("\\boxed{")
    content = _balanced(tail, start + len("\\boxed")) if start >= 0 else None
    correct = False
    if content is not None:
        configs = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
        gold = parse(f"${ground_truth}$", extraction_config=configs, parsing_timeout=timeout_s)
        predicted = parse(f"\\boxed{{{content}}}", extraction_config=configs, parsing_timeout=timeout_s)
        correct = bool(gold and predicted and verify(gold, predicted, timeout_seconds=timeout_s))
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


def _vote_key(content: str | None, integer: int | None) -> Any:
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
    return int(number) if number.is_integer() else number


MATH_SCORERS: dict[str, Callable[[str, Any], Score]] = {
    "boxed-integer": score_boxed_integer,
    "math-verify-tail": score_math_verify_tail,
}


def math_verify_version() -> str:
    try:
        return metadata.version("math-verify")
    except metadata.PackageNotFoundError:  # pragma: no cover
        return "not installed"
