"""Judge-free evidence: the run's model solves each generated problem through our own
AIME text-only prompt and scorer; the stated answer is checked against its answers."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from pytest_agenteval.api.records import sample_seed
from pytest_agenteval.api.suite import RolloutContext
from pytest_agenteval.models import SamplerError, SamplingParams
from pytest_agenteval.scorers import MATH_SCORERS
from pytest_agenteval.solvers.answer import answer_only
from pytest_agenteval.tasks.aime25 import text_only_messages
from pytest_agenteval.tasks.datagen._checks import answer_format
from pytest_agenteval.tasks.datagen.data import GeneratedProblem


async def solve_item(ctx: RolloutContext, item: GeneratedProblem, samples: int) -> dict[str, Any]:
    stated = answer_format(item.answer)["value"]
    settings = ctx.settings
    messages = text_only_messages(item.problem)

    async def one(j: int) -> Any:
        params = SamplingParams(
            temperature=settings.temperature,
            top_p=settings.top_p,
            top_k=settings.top_k,
            max_tokens=settings.max_tokens,
            seed=sample_seed(settings.seed, f"{item.problem_id}\x1fsolve", j),
        )
        try:
            return answer_only(await ctx.sampler.complete(messages, params))  # never the thoughts
        except SamplerError as exc:
            return exc

    completions = await asyncio.gather(*(one(j) for j in range(samples)))
    errors = [str(c) for c in completions if isinstance(c, Exception)]
    scores = [
        MATH_SCORERS["boxed-integer"](c.text, stated) for c in completions if not isinstance(c, Exception)
    ]
    answers = [s.answer for s in scores]
    votes = Counter(a for a in answers if a is not None)
    majority = votes.most_common(1)[0][0] if votes else None
    return {
        "samples": len(scores),
        "errors": errors,
        "stated": stated,
        "answers": answers,
        "correct": sum(s.correct for s in scores) if stated is not None else 0,
        "formatted": sum(s.formatted for s in scores),
        "majority": majority,
        # answers are the lab's normalised integer strings
        "majority_agrees": stated is not None and majority == str(stated),
        "prompt_tokens": sum(c.prompt_tokens for c in completions if not isinstance(c, Exception)),
        "completion_tokens": sum(c.completion_tokens for c in completions if not isinstance(c, Exception)),
    }
