"""ReTool mode: the model solves an AIME problem calling a Python interpreter between
turns, with the seed's budgets (4 code calls, 6 assistant turns, 8192 trajectory tokens,
1024 per turn, 512 per tool response) and the seed's reward rule for scoring."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .records import Rollout
from .tool_loop import TEXT_PROTOCOL, TOOL_SCHEMA, LoopBudget, run_tool_loop, uses_native_tools

if TYPE_CHECKING:
    from .options import Settings
    from .suite import RolloutContext

ANSWER_MARKER = "\\boxed{"
SYSTEM_PROMPT = (
    "You are a careful mathematician. Solve the problem step by step. You may call the "
    "Python tool `code_interpreter` to compute or check intermediate results; call it at "
    "most once per reply and wait for its output. When you are done, give the final "
    "answer as an integer within \\boxed{}."
)


def initial_messages(problem: str, settings: Settings, native: bool = False) -> list[dict[str, Any]]:
    system = SYSTEM_PROMPT
    if not native:
        system += TEXT_PROTOCOL.format(schema=json.dumps(TOOL_SCHEMA))
    return [{"role": "system", "content": system}, {"role": "user", "content": problem}]


def budget(settings: Settings) -> LoopBudget:
    return LoopBudget(
        max_turns=settings.max_assistant_turns,
        max_calls=settings.max_code_calls,
        max_trajectory_tokens=settings.max_trajectory_tokens,
        max_turn_tokens=settings.max_assistant_tokens,
        max_tool_response_tokens=settings.max_tool_response_tokens,
    )


async def retool_rollout(ctx: RolloutContext) -> Rollout:
    native = uses_native_tools(getattr(ctx.sampler, "native_tools", False), ctx.settings)
    messages = initial_messages(ctx.problem.text, ctx.settings, native)
    return await run_tool_loop(ctx, messages, budget(ctx.settings), native, ANSWER_MARKER)
