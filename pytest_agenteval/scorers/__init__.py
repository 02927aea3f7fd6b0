"""Scorers: pure functions of (model output, reference) -> verdict with reasons."""

from pytest_agenteval.scorers.math import (
    MATH_SCORERS,
    answers_equivalent,
    extract_last_boxed,
    extract_reward_boxed,
    math_verify_version,
    normalize_aime_answer,
    score_boxed_integer,
    score_math_verify_tail,
)

__all__ = [
    "MATH_SCORERS",
    "answers_equivalent",
    "extract_last_boxed",
    "extract_reward_boxed",
    "math_verify_version",
    "normalize_aime_answer",
    "score_boxed_integer",
    "score_math_verify_tail",
]
