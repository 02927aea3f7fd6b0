"""ReTool mode: the ReTool lab's rollout (rollout.py) for one trajectory. The model calls a
Python interpreter between turns under the lab's budgets: 4 code calls, 6 assistant
turns, 8192 trajectory tokens (prompt included), 1024 per turn, 512 per tool response."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from pytest_agenteval.api.records import THINKING_TRUNCATED, Rollout
from pytest_agenteval.models import ContextOverflowError
from pytest_agenteval.solvers.answer import answer_only, whole_turn
from pytest_agenteval.solvers.tool_loop import (
    PromptTooLong,
    SandboxFailure,
    Trajectory,
    finished_rollout,
    turn_seed,
)
from pytest_agenteval.tasks.aime25._conversation import open_conversation
from pytest_agenteval.tasks.aime25._protocol import (
    fit_tool_content,
    initial_messages,
    native_call_text,
    parse_assistant,
    tool_content,
    tool_message,
)

if TYPE_CHECKING:
    from pytest_agenteval.api.suite import RolloutContext


async def retool_rollout(ctx: RolloutContext) -> Rollout:
    settings = ctx.settings
    conversation = open_conversation(ctx.sampler, initial_messages(ctx.problem.text))
    state = Trajectory()
    started = time.monotonic()
    if await conversation.prompt_length() >= settings.max_trajectory_tokens:
        raise PromptTooLong(
            f"the prompt alone is {await conversation.prompt_length()} tokens, over the trajectory "
            f"budget of {settings.max_trajectory_tokens}; raise --max-trajectory-tokens"
        )
    stop_reason = await _run(ctx, conversation, state)
    extra = {"continuation": conversation.mode, "token_counting": conversation.counting}
    return finished_rollout(state, stop_reason, started, extra)


async def _run(ctx: RolloutContext, conversation: Any, state: Trajectory) -> str:
    settings = ctx.settings
    while True:
        room = settings.max_trajectory_tokens - await conversation.prompt_length()
        if room <= 0:  # rollout.py make_request: done, with no final text
            state.final_text = ""
            return "token_budget"
        params = ctx.params(
            max_tokens=min(settings.max_assistant_tokens, room), seed=turn_seed(ctx.seed, state.turns)
        )
        try:
            completion = await conversation.sample(params)
        except ContextOverflowError as exc:  # outgrew the model's window
            return state.refused(exc)
        # Thinking on: the call and the answer are read from the answer after the thoughts;
        # the next turn sees the whole turn, thoughts included, as the lab's does (docs/aime25.md)
        completion = answer_only(completion)
        text = completion.text.strip()  # the chat template strips assistant content too
        if not completion.reasoning_closed:  # cut off inside its thoughts: no answer, no call
            _account(state, completion, text, parse_assistant(""))
            state.final_text = ""
            return THINKING_TRUNCATED
        if completion.tool_calls:
            text = native_call_text(text, completion.tool_calls)
        parsed = parse_assistant(text)
        _account(state, completion, text, parsed)
        said = text if not completion.tool_calls else completion.text.strip()
        if completion.reasoning is not None:  # the lab's message: the whole text, stripped
            said = whole_turn(completion).strip()
        conversation.add_assistant(said, completion)
        if parsed.kind != "tool":
            state.final_text = text
            if parsed.kind == "invalid":
                return "invalid_protocol"
            return "length" if completion.finish_reason == "length" else "answer"
        if state.code_calls >= settings.max_code_calls or state.turns >= settings.max_assistant_turns:
            state.final_text = text  # the call is not run (rollout.py begin_advance)
            return "call_budget" if state.code_calls >= settings.max_code_calls else "turn_budget"
        if not await _call_tool(ctx, conversation, state, parsed.code or "", text):
            state.final_text = text
            return "token_budget"


def _account(state: Trajectory, completion: Any, text: str, parsed: Any) -> None:
    state.count_turn(completion)
    state.transcript.append(
        {
            "role": "assistant",
            "turn": state.turns,
            "content": text,
            **({"reasoning": completion.reasoning} if completion.reasoning is not None else {}),
            "action": {"tool": "call"}.get(parsed.kind, parsed.kind),
            "code": parsed.code,
            "finish_reason": completion.finish_reason,
            "prompt_tokens": completion.prompt_tokens,
            "completion_tokens": completion.completion_tokens,
            "latency_s": round(completion.latency_s, 4),
            "cached": completion.cached,
        }
    )


async def _call_tool(ctx: RolloutContext, conversation: Any, state: Trajectory, code: str, text: str) -> bool:
    """Run the call; show its output shrunk to fit (rollout.py finish_advance). False when
    not even 64 characters of it fit the trajectory budget: the call is then not counted."""
    result = await ctx.resources.run_code(code, ctx, state.code_calls, auto_print=False)
    if result.status == "sandbox_error":  # the sandbox broke, not the model's code
        raise SandboxFailure(f"code call {state.code_calls + 1}: {result.output.strip()[:200]}")
    raw = tool_content(result, ctx.settings.sandbox_timeout)
    default_id = f"code-{ctx.problem.index}-{ctx.sample_index}-{state.code_calls + 1}"
    call_id = conversation.tool_call_id(default_id)
    limit = ctx.settings.max_trajectory_tokens

    async def fits(content: str) -> bool:
        return await conversation.length_with(tool_message(call_id, content)) <= limit

    shown = await fit_tool_content(raw, ctx.settings.max_tool_response_tokens, conversation.count, fits)
    if shown is not None:
        conversation.add_tool(tool_message(call_id, shown))
        state.code_calls += 1
    state.transcript.append(
        {
            "role": "tool",
            "call": state.code_calls,
            "status": result.status,
            "output": shown if shown is not None else raw,
            "truncated": result.truncated or (shown is not None and shown != raw),
            "shown": shown is not None,
            "latency_s": round(result.latency_s, 4),
            "cached": getattr(result, "cached", False),
            "containment": ctx.resources.containment_level(),
        }
    )
    return shown is not None
