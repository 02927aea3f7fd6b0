"""The multi-turn code-interpreter loop shared by ReTool (AIME) and the default GAIA agent.

One state machine for every backend: text backends speak the raw `<tool_call>` protocol,
OpenAI-compatible endpoints native `tools`/`tool_calls`; both parse to one `Action`.
Budgets: code calls, assistant turns, trajectory tokens, tokens per turn, tokens per
tool response (truncated keeping the tail)."""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_agenteval.api import progress
from pytest_agenteval.api.records import THINKING_TRUNCATED, Rollout
from pytest_agenteval.models import Completion, ContextOverflowError
from pytest_agenteval.solvers.answer import answer_only

if TYPE_CHECKING:
    from pytest_agenteval.api.suite import RolloutContext
    from pytest_agenteval.config.options import Settings

TOOL_NAME = "code_interpreter"
TOOL_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Run Python 3 code in a fresh sandbox and return what it prints "
        "(the value of a trailing expression is printed). numpy and sympy are available.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "Python code to run"}},
            "required": ["code"],
        },
    },
}
TEXT_PROTOCOL = (
    "\n\n# Tools\n\n<tools>\n{schema}\n</tools>\n\nTo call the tool, reply with exactly:\n"
    "<tool_call>\n<function=code_interpreter>\n<parameter=code>\nPYTHON CODE\n</parameter>\n"
    "</function>\n</tool_call>"
)
_RAW_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_RAW_FUNCTION = re.compile(r"<function=([\w.-]+)>(.*?)(?:</function>|$)", re.DOTALL)
_RAW_PARAMETER = re.compile(r"<parameter=code>\n?(.*?)\n?(?:</parameter>|$)", re.DOTALL)


@dataclass(frozen=True)
class Action:
    """What one assistant turn asked for: an answer, one code call, or a protocol error."""

    kind: str  # "answer" | "call" | "invalid"
    code: str = ""
    reason: str = ""


def uses_native_tools(backend_takes_tools: bool, settings: Settings) -> bool:
    """Native `tools`/`tool_calls` or the raw-text protocol: auto follows the backend."""
    if settings.tool_protocol == "auto":
        return backend_takes_tools
    return settings.tool_protocol == "native"


def parse_raw_action(text: str, answer_marker: str) -> Action:
    """Parse the raw-text protocol: at most one well-formed `<tool_call>` per turn."""
    calls = _RAW_CALL.findall(text)
    if not calls:
        return Action("answer")
    if len(calls) > 1:
        return Action("invalid", reason="more than one tool call in a turn")
    function = _RAW_FUNCTION.search(calls[0])
    if function is None or function.group(1) != TOOL_NAME:
        return Action("invalid", reason="tool call without <function=code_interpreter>")
    parameter = _RAW_PARAMETER.search(function.group(2))
    if parameter is None or not parameter.group(1).strip():
        return Action("invalid", reason="tool call without a code parameter")
    return _checked_call(text[: text.find("<tool_call>")], parameter.group(1), answer_marker)


def parse_native_action(completion: Completion, answer_marker: str) -> Action:
    """Parse OpenAI `tool_calls`: exactly one call to code_interpreter with a code string."""
    if not completion.tool_calls:
        return Action("answer")
    if len(completion.tool_calls) > 1:
        return Action("invalid", reason="more than one tool call in a turn")
    call = completion.tool_calls[0]
    if call.name != TOOL_NAME:
        return Action("invalid", reason=f"unknown tool {call.name!r}")
    try:
        arguments = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        return Action("invalid", reason="tool arguments are not valid JSON")
    code = arguments.get("code") if isinstance(arguments, dict) else None
    if not isinstance(code, str) or not code.strip():
        return Action("invalid", reason="tool call without a code string")
    return _checked_call(completion.text, code, answer_marker)


def _checked_call(prose: str, code: str, answer_marker: str) -> Action:
    if answer_marker in prose:
        return Action("invalid", reason="a tool call and a final answer in the same turn")
    return Action("call", code=code)


def truncate_tail(text: str, max_tokens: int, count_tokens: Any) -> tuple[str, bool]:
    """Keep the end of the tool output within its token budget (errors and final
    prints are at the end)."""
    if count_tokens(text) <= max_tokens:
        return text, False
    low, high = 0, len(text)
    while low < high:  # smallest cut whose tail fits
        middle = (low + high) // 2
        if count_tokens(text[middle:]) <= max_tokens:
            high = middle
        else:
            low = middle + 1
    return "...(truncated)\n" + text[low:], True


def turn_seed(sample_seed: int, turn: int) -> int:
    digest = hashlib.sha256(f"{sample_seed}\x1fturn\x1f{turn}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


@dataclass
class Trajectory:
    """What a multi-turn rollout has done so far (its messages are the loop's own)."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    transcript: list[dict[str, Any]] = field(default_factory=list)
    tokens_used: int = 0  # prompt + completions so far, as the backend counts them
    turns: int = 0
    code_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 0
    retries: int = 0
    all_cached: bool = True
    final_text: str = ""
    finish_reason: str = "stop"
    overflow: str = ""  # the backend's ContextOverflowError, when that ended the trajectory
    reasoning: str | None = None  # the last turn's thoughts (its answer is final_text)
    reasoning_tokens: int | None = None  # summed over the turns that said how many
    reasoning_estimated: bool = False  # a turn's reasoning tokens were the sampler's estimate

    def count_turn(self, completion: Completion) -> None:
        """One more model turn: its tokens, requests, cache state and reasoning."""
        self.turns += 1
        self.reasoning = completion.reasoning
        if completion.reasoning_tokens is not None:
            self.reasoning_tokens = (self.reasoning_tokens or 0) + completion.reasoning_tokens
            self.reasoning_estimated = self.reasoning_estimated or completion.reasoning_tokens_estimated
        progress.note_turn(completion)  # the live progress line moves with each turn
        self.finish_reason = completion.finish_reason
        self.prompt_tokens += completion.prompt_tokens
        self.completion_tokens += completion.completion_tokens
        self.attempts += completion.attempts
        self.retries += max(0, completion.attempts - 1)
        self.all_cached = self.all_cached and completion.cached

    def refused(self, overflow: ContextOverflowError) -> str:
        """The backend refused the next prompt as over the context: the trajectory ends
        here, scored as it is; the refused request was sent and counts."""
        self.overflow = str(overflow)
        self.attempts += overflow.attempts
        return CONTEXT_EXCEEDED


# The stop reason of a trajectory whose next prompt the backend refused as longer than the
# model's context (ContextOverflowError): it ends there and is scored, not an error.
CONTEXT_EXCEEDED = "context_exceeded"


class SandboxFailure(RuntimeError):
    """The sandbox itself failed: the generation is missing, not wrong."""


class PromptTooLong(ValueError):
    """The initial messages already exceed the trajectory budget."""


def prompt_tokens(sampler: Any, messages: list[dict[str, Any]]) -> int:
    """Tokens of the messages' contents (plus a few per message for the chat template)."""
    return sum(sampler.count_tokens(str(m.get("content") or "")) + 4 for m in messages)


@dataclass(frozen=True)
class LoopBudget:
    max_turns: int
    max_calls: int
    max_trajectory_tokens: int
    max_turn_tokens: int
    max_tool_response_tokens: int


async def run_tool_loop(
    ctx: RolloutContext,
    messages: list[dict[str, Any]],
    budget: LoopBudget,
    native: bool,
    answer_marker: str,
) -> Rollout:
    """Alternate model turns and sandboxed code calls until an answer or a budget."""
    state = Trajectory(messages, [])
    state.tokens_used = prompt_tokens(ctx.sampler, state.messages)
    if state.tokens_used >= budget.max_trajectory_tokens:
        raise PromptTooLong(
            f"the prompt alone is ~{state.tokens_used} tokens, over the trajectory budget of "
            f"{budget.max_trajectory_tokens}; raise --max-trajectory-tokens"
        )
    started = time.monotonic()
    stop_reason = await _run_turns(ctx, state, budget, native, answer_marker)
    return finished_rollout(state, stop_reason, started)


def finished_rollout(
    state: Trajectory, stop_reason: str, started: float, extra: dict[str, Any] | None = None
) -> Rollout:
    """The Rollout of a finished trajectory, with its code-call counts."""
    return Rollout(
        text=state.final_text,
        stop_reason=stop_reason,
        finish_reason=state.finish_reason,
        turns=state.turns,
        code_calls=state.code_calls,
        prompt_tokens=state.prompt_tokens,
        completion_tokens=state.completion_tokens,
        latency_s=time.monotonic() - started,
        attempts=state.attempts,
        retries=state.retries,
        cached=state.all_cached and state.turns > 0,
        transcript=tuple(state.transcript),
        extra={
            **tool_stats(state.transcript),
            **({"context_overflow": state.overflow} if state.overflow else {}),
            **({"reasoning_tokens_estimated": True} if state.reasoning_estimated else {}),
            **(extra or {}),
        },
        reasoning=state.reasoning,
        reasoning_tokens=state.reasoning_tokens,
    )


async def _run_turns(
    ctx: RolloutContext, state: Trajectory, budget: LoopBudget, native: bool, answer_marker: str
) -> str:
    while True:
        if state.turns >= budget.max_turns:
            return "turn_budget"
        room = budget.max_trajectory_tokens - state.tokens_used
        if room <= 0:
            return "token_budget"
        params = ctx.params(
            max_tokens=min(budget.max_turn_tokens, room), seed=turn_seed(ctx.seed, state.turns)
        )
        try:
            completion = await ctx.sampler.complete(
                state.messages, params, tools=[TOOL_SCHEMA] if native else None
            )
        except ContextOverflowError as exc:  # outgrew the model's window
            return state.refused(exc)
        completion = answer_only(completion)  # the tool call and the answer come after the thoughts
        _account(state, completion)
        if not completion.reasoning_closed:  # cut off inside its thoughts: no answer, no call
            _record_turn(state, completion, Action("answer"), native)
            return THINKING_TRUNCATED
        action = (
            parse_native_action(completion, answer_marker)
            if native
            else parse_raw_action(completion.text, answer_marker)
        )
        _record_turn(state, completion, action, native)
        if action.kind == "invalid":
            return "invalid_protocol"
        if action.kind == "answer":
            return "length" if completion.finish_reason == "length" else "answer"
        if state.code_calls >= budget.max_calls:
            return "call_budget"
        if not await _call_tool(ctx, state, action.code, native, budget):
            return "token_budget"


def _account(state: Trajectory, completion: Completion) -> None:
    state.count_turn(completion)
    state.final_text = completion.text
    if completion.prompt_tokens:  # the backend's own count of the whole conversation
        state.tokens_used = completion.prompt_tokens + completion.completion_tokens
    else:
        state.tokens_used += completion.completion_tokens


def _record_turn(state: Trajectory, completion: Completion, action: Action, native: bool) -> None:
    message: dict[str, Any] = {"role": "assistant", "content": completion.text}
    if native and completion.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id or f"call_{state.turns}",
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in completion.tool_calls
        ]
    state.messages.append(message)
    state.transcript.append(
        {
            "role": "assistant",
            "turn": state.turns,
            "content": completion.text,
            **({"reasoning": completion.reasoning} if completion.reasoning is not None else {}),
            "action": action.kind,
            "code": action.code or None,
            "invalid_reason": action.reason or None,
            "finish_reason": completion.finish_reason,
            "completion_tokens": completion.completion_tokens,
            "latency_s": round(completion.latency_s, 4),
            "cached": completion.cached,
        }
    )


async def _call_tool(
    ctx: RolloutContext, state: Trajectory, code: str, native: bool, budget: LoopBudget
) -> bool:
    """Run the call and show its output to the model. As in the seed, an observation that
    no longer fits the trajectory budget is not shown and the call is not counted."""
    result = await ctx.resources.run_code(code, ctx, state.code_calls)
    if result.status == "sandbox_error":  # the sandbox broke, not the model's code
        raise SandboxFailure(f"code call {state.code_calls + 1}: {result.output.strip()[:200]}")
    observation, truncated = truncate_tail(
        result.output, budget.max_tool_response_tokens, ctx.sampler.count_tokens
    )
    if native:
        call_id = state.messages[-1]["tool_calls"][0]["id"]
        message = {"role": "tool", "tool_call_id": call_id, "content": observation}
    else:
        message = {"role": "user", "content": f"<tool_response>\n{observation}\n</tool_response>"}
    cost = ctx.sampler.count_tokens(message["content"])
    shown = state.tokens_used + cost <= budget.max_trajectory_tokens
    if shown:
        state.messages.append(message)
        state.tokens_used += cost
        state.code_calls += 1
    state.transcript.append(
        {
            "role": "tool",
            "call": state.code_calls,
            "status": result.status,
            "output": observation,
            "truncated": truncated or result.truncated,
            "shown": shown,
            "latency_s": round(result.latency_s, 4),
            "cached": getattr(result, "cached", False),
            "containment": ctx.resources.containment_level(),
        }
    )
    return shown


def tool_stats(transcript: list[dict[str, Any]]) -> dict[str, Any]:
    calls = [entry for entry in transcript if entry["role"] == "tool"]
    return {
        "code_ok": sum(c["status"] == "ok" for c in calls),
        "code_errors": sum(c["status"] in ("error", "killed", "sandbox_error") for c in calls),
        "code_timeouts": sum(c["status"] == "timeout" for c in calls),
    }
