"""What every solver and suite reads of a reply: the answer after the reasoning.

Samplers split a reasoning model's reply themselves (api/sampler.py: `text` is the answer,
`reasoning` the thoughts, `reasoning_closed` False when they never ended). `answer_only`
is the one place downstream that relies on it, and splits a reply that still holds a think
block (a sampler of the user's own, a backend that does not split) with the default tags,
so no scorer ever reads the thoughts."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from pytest_agenteval.api.answer import strip_thoughts
from pytest_agenteval.api.reasoning import DEFAULT_THINK_TAGS
from pytest_agenteval.api.records import THINKING_TRUNCATED
from pytest_agenteval.api.sampler import Completion


def answer_only(completion: Completion) -> Completion:
    """The completion with `text` the answer only (unchanged where the sampler left no
    think block in it)."""
    if not completion.reasoning_closed:
        return completion
    split = strip_thoughts(completion.text, completion.reasoning)
    if split.answer == completion.text and split.closed:
        return completion
    return dataclasses.replace(
        completion, text=split.answer, reasoning=split.reasoning, reasoning_closed=split.closed
    )


def answer_stop_reason(completion: Completion) -> str:
    """How a reply that is a final answer ended: cut off inside its thoughts, cut off by
    max_tokens, or on its own."""
    if not completion.reasoning_closed:
        return THINKING_TRUNCATED
    return "length" if completion.finish_reason == "length" else "answer"


def whole_turn(completion: Completion) -> str:
    """The turn as the model generated it: its thoughts in the think tags, then the answer
    (what the ReTool lab's transcript keeps, docs/aime25.md)."""
    if completion.reasoning is None:
        return completion.text
    opening, closing = DEFAULT_THINK_TAGS
    if not completion.reasoning_closed:
        return f"{opening}{completion.reasoning}"
    return f"{opening}{completion.reasoning}{closing}{completion.text}"


def summed_reasoning_tokens(completions: Iterable[Completion]) -> int | None:
    """Reasoning tokens of several turns: None when no turn said how many it had."""
    known = [c.reasoning_tokens for c in completions if c.reasoning_tokens is not None]
    return sum(known) if known else None


def estimated_mark(completions: Iterable[Completion]) -> dict[str, bool]:
    """`reasoning_tokens_estimated: true` on a generation whose reasoning tokens are (in
    part) the sampler's estimate (an endpoint that does not report them: the character
    share); nothing where every count is exact."""
    estimated = any(c.reasoning_tokens_estimated for c in completions)
    return {"reasoning_tokens_estimated": True} if estimated else {}
