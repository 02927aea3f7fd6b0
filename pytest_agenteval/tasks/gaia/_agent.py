"""The agent under test: the default one (the model, GAIA's official system prompt, the
sandboxed Python tool, the attachment reader) or the user's own.

A user plugs in an agent with a fixture in their conftest.py:

    import pytest
    from pytest_agenteval.tasks.gaia import AgentResult

    @pytest.fixture(scope="session")
    def agenteval_agent():
        async def agent(task):            # task: pytest_agenteval.tasks.gaia.GaiaTask
            answer = await my_agent.run(task.question, files=[task.file_path])
            return AgentResult(answer=answer.text, steps=answer.steps,
                               trajectory=answer.messages, prompt_tokens=..., completion_tokens=...)
        return agent
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_agenteval.api.records import Rollout
from pytest_agenteval.solvers.tool_loop import (
    TEXT_PROTOCOL,
    TOOL_SCHEMA,
    LoopBudget,
    run_tool_loop,
    uses_native_tools,
)
from pytest_agenteval.tasks.gaia._data import GaiaTask
from pytest_agenteval.tasks.gaia._prompt import GAIA_SYSTEM_PROMPT, build_user_message

if TYPE_CHECKING:
    from pytest_agenteval.api.suite import RolloutContext

ANSWER_MARKER = "FINAL ANSWER"
TOOL_NOTE = (
    "\n\nYou can run Python with the `code_interpreter` tool (one call per reply; its output "
    "comes back to you). Attached files are shown in the message as extracted text."
)


@dataclass(frozen=True)
class AgentResult:
    """What an agent returns for one task."""

    answer: str  # its final output; the FINAL ANSWER extraction is applied to it
    steps: int = 0
    trajectory: Sequence[Mapping[str, Any]] = field(default_factory=tuple)
    prompt_tokens: int = 0
    completion_tokens: int = 0


Agent = Callable[[GaiaTask], Awaitable["AgentResult | Mapping[str, Any] | str"]]


def default_messages(task: GaiaTask, native: bool, max_trajectory_tokens: int = 8192) -> list[dict[str, str]]:
    system = GAIA_SYSTEM_PROMPT + TOOL_NOTE
    if not native:
        system += TEXT_PROTOCOL.format(schema=json.dumps(TOOL_SCHEMA))
    # Attached text gets at most about half of the trajectory budget (4 characters a token).
    user = build_user_message(task, max_chars=2 * max_trajectory_tokens)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


async def default_agent(ctx: RolloutContext, task: GaiaTask) -> Rollout:
    settings = ctx.settings
    native = uses_native_tools(getattr(ctx.sampler, "native_tools", False), settings)
    budget = LoopBudget(
        max_turns=settings.gaia_max_steps,
        max_calls=settings.gaia_max_steps,
        max_trajectory_tokens=settings.max_trajectory_tokens,
        max_turn_tokens=settings.max_assistant_tokens,
        max_tool_response_tokens=settings.max_tool_response_tokens,
    )
    messages = default_messages(task, native, settings.max_trajectory_tokens)
    return await run_tool_loop(ctx, messages, budget, native, ANSWER_MARKER)


async def run_user_agent(agent: Agent, task: GaiaTask) -> Rollout:
    started = time.monotonic()
    raw = await agent(task)
    latency = time.monotonic() - started
    result = _as_result(raw)
    return Rollout(
        text=result.answer,
        stop_reason="answer",
        turns=result.steps,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        latency_s=latency,
        attempts=0,
        transcript=tuple(dict(step) for step in result.trajectory) or None,
        extra={"agent": getattr(agent, "__qualname__", type(agent).__name__)},
    )


def _as_result(raw: Any) -> AgentResult:
    if isinstance(raw, AgentResult):
        return raw
    if isinstance(raw, str):
        return AgentResult(answer=raw)
    if isinstance(raw, Mapping) and "answer" in raw:
        return AgentResult(**{k: raw[k] for k in AgentResult.__dataclass_fields__ if k in raw})
    raise TypeError(
        f"the agent returned {type(raw).__name__}; return an AgentResult, a dict "
        "with an `answer`, or the answer text"
    )
