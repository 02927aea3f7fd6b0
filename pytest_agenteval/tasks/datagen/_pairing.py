"""Seeded, topic-matched pairing of generated problems with reference opponents, and
what each side of a comparison shows (only fields both sides have)."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_agenteval.tasks.datagen.data import GeneratedProblem, ReferenceProblem, topic_marker


@dataclass(frozen=True)
class Opponents:
    references: tuple[ReferenceProblem, ...]
    topic_matched: bool  # False: no reference of this topic, drawn from the whole set


def pair_opponents(
    problems: Sequence[GeneratedProblem], references: Sequence[ReferenceProblem], k: int, seed: int
) -> dict[str, Opponents]:
    """k opponents per generated problem, from the references of its topic (all of them
    when none share it), shuffled under (seed, topic) and dealt round-robin so reuse is
    balanced. Depends on the file and the seed, never on selection or workers."""
    by_topic: dict[str, list[ReferenceProblem]] = {}
    for reference in references:
        if reference.topic:
            by_topic.setdefault(topic_marker(reference.topic), []).append(reference)
    dealt: dict[str, int] = {}
    pairs: dict[str, Opponents] = {}
    for problem in problems:
        topic = problem.marker
        pool = by_topic.get(topic) or list(references)
        order = list(pool)
        random.Random(f"{seed}\x1f{topic}").shuffle(order)
        start = dealt.get(topic, 0)
        count = min(k, len(order))
        chosen = tuple(order[(start + t) % len(order)] for t in range(count))
        dealt[topic] = start + count
        pairs[problem.problem_id] = Opponents(chosen, topic in by_topic)
    return pairs


def _clean(text: str) -> str:
    return re.sub(r"[ \t]+", " ", re.sub(r"\n{3,}", "\n\n", text)).strip()


def shown_fields(generated: GeneratedProblem, reference: ReferenceProblem) -> tuple[str, ...]:
    """problem always; answer and solution only when both sides have one (math-ai/aime25
    has no solutions: a generated item must not meet an opponent without one)."""
    fields = ["problem"]
    for name in ("answer", "solution"):
        if getattr(generated, name) and getattr(reference, name):
            fields.append(name)
    return tuple(fields)


def side(item: GeneratedProblem | ReferenceProblem, fields: Sequence[str]) -> dict[str, str]:
    """Ids, sources and topics stay out, so the judge cannot tell which one is real."""
    return {name: _clean(getattr(item, name)) for name in fields}
