"""Length and budget truth: how many generations the token budget cut off, how many of
them inside their thoughts, and how the completion tokens split between reasoning and
answer. Above `--length-warn-share` cut off, the budget, not the model, decided the score."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_agenteval.api.records import THINKING_TRUNCATED, ProblemRecord, answer_tokens


def length_block(
    records: Sequence[ProblemRecord], max_tokens: Any, warn_share: float, budget_flag: str
) -> dict[str, Any]:
    """The summary's `length` object over every generation of `records`."""
    generations = [g.rollout for r in records for g in r.generations]
    total = len(generations)
    hit = sum(r.finish_reason == "length" for r in generations)
    truncated = sum(r.stop_reason == THINKING_TRUNCATED for r in generations)
    known = [r.reasoning_tokens for r in generations if r.reasoning_tokens is not None]
    answers = [answer_tokens(r) for r in generations]
    share = hit / total if total else None
    warning = None
    if share is not None and share > warn_share:
        warning = (
            f"{share:.0%} of generations hit max_tokens ({max_tokens}): the budget, not the model, "
            f"decided the score; raise {budget_flag}"
        )
    return {
        "generations": total,
        "reasoning_generations": sum(r.reasoning is not None for r in generations),
        "max_tokens": max_tokens,
        "hit_max_tokens": hit,
        "hit_max_tokens_share": _share(hit, total),
        "thinking_truncated": truncated,
        "thinking_truncated_share": _share(truncated, total),
        "reasoning_tokens": sum(known) if known else None,  # None: no generation said
        "answer_tokens": sum(a for a in answers if a is not None),
        "answer_tokens_unknown": sum(a is None for a in answers),  # reasoned, split not said
        # generations whose split is the sampler's estimate (an endpoint that does not report it)
        "reasoning_tokens_estimated": sum(
            bool(r.extra.get("reasoning_tokens_estimated")) for r in generations
        ),
        "warn_share": warn_share,
        "warning": warning,
    }


def _share(count: int, total: int) -> float | None:
    return round(count / total, 4) if total else None


def length_lines(summary: Mapping[str, Any]) -> list[str]:
    """The terminal's lines for it: the warning (first, like INCOMPLETE), and the
    thinking_truncated count on its own line where a generation reasoned."""
    length = summary.get("length") or {}
    return [f"WARNING: {length['warning']}"] if length.get("warning") else []


def thinking_row(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    length = summary.get("length") or {}
    if not length.get("thinking_truncated") and not length.get("reasoning_generations"):
        return []
    share = length.get("thinking_truncated_share") or 0.0
    return [
        (
            "thinking truncated",
            f"{length.get('thinking_truncated', 0)} of {length.get('generations', 0)} generations "
            f"({share:.1%}): reasoning never closed, scored incorrect",
        ),
        (
            "reasoning / answer",
            f"{_tokens(length.get('reasoning_tokens'))} / {length.get('answer_tokens', 0)} tokens"
            + (
                f" (estimated for {length['reasoning_tokens_estimated']} generations)"
                if length.get("reasoning_tokens_estimated")
                else ""
            ),
        ),
    ]


def _tokens(value: Any) -> str:
    return "unknown" if value is None else str(value)
