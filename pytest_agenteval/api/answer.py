"""The answer a scorer reads: a reply with every think block taken off.

`split_reasoning` (api/reasoning.py) ends the reasoning at the first closing tag. A reply
may think again after it (two blocks); a scorer must not read the second block either, so
what is left is split again until no block remains. An opening tag whose block never
closes makes the whole reply unclosed: no answer (`thinking_truncated`)."""

from __future__ import annotations

from pytest_agenteval.api.reasoning import DEFAULT_THINK_TAGS, ReasonedText, split_reasoning


def strip_thoughts(answer: str, reasoning: str | None = None) -> ReasonedText:
    """`answer` (a reply, or what a sampler left after the reasoning it split) without any
    think block; the blocks' text joins `reasoning`. A closing tag with no opening tag is a
    block only where nothing was split yet (a template that opened the block in the prompt)."""
    opening, closing = DEFAULT_THINK_TAGS
    while opening in answer or (reasoning is None and closing in answer):
        split = split_reasoning(answer)
        if split.reasoning is None:
            break
        reasoning = split.reasoning if reasoning is None else f"{reasoning}{split.reasoning}"
        if not split.closed:
            return ReasonedText("", reasoning, False)
        answer = split.answer
    return ReasonedText(answer, reasoning, True)
