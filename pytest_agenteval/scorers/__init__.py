"""Scorers: pure functions of (model output, reference) -> verdict with reasons."""

from .math import (
    MATH_SCORERS,
    extract_last_boxed,
    math_verify_version,
    normalize_integer_answer,
    score_boxed_integer,
    score_math_verify_tail,
)

__all__ = [
    "MATH_SCORERS",
    "extract_last_boxed",
    "math_verify_version",
    "normalize_integer_answer",
    "score_boxed_integer",
    "score_math_verify_tail",
]
