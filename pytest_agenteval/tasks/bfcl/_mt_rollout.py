"""Play one multi-turn entry the way bfcl-eval's runner does (``inference_multi_turn_*``
of ``BaseHandler`` with the OpenAI handler's message formats).

Each user turn is added to the conversation; the model then answers step by
step. A step that decodes to calls is executed on the entry's environment and
the results go back to the model; a step that fails to decode or decodes to no
call ends the turn. After more than 20 executed steps in one turn
(``MAXIMUM_STEP_LIMIT``) the rollout is force-terminated. Held-out functions
(miss_func) arrive at their turn: in the prompt text (prompting) or as new
tools (native).

- prompting: the official system prompt, replies as text, results returned as
  one user message holding ``repr([{"role": "tool", "name": call, "content": result}])``;
- native: ``tools``, results returned as ``tool`` messages with the call ids.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from pytest_agenteval.api import progress
from pytest_agenteval.api.records import THINKING_TRUNCATED, Rollout
from pytest_agenteval.models import Completion, ContextOverflowError, Sampler, SamplingParams
from pytest_agenteval.solvers.answer import answer_only, summed_reasoning_tokens
from pytest_agenteval.tasks.bfcl._decode import DecodeError
from pytest_agenteval.tasks.bfcl._mt_data import MultiTurnEntry
from pytest_agenteval.tasks.bfcl._mt_decode import calls_from_text, calls_from_tool_calls, is_empty_step
from pytest_agenteval.tasks.bfcl._mt_env import Environment
from pytest_agenteval.tasks.bfcl._prompt import native_tools, prompt_messages

MAXIMUM_STEP_LIMIT = 20
ADDED_FUNCTIONS_FC = "I have updated some more functions you can choose from. What about now?"
ADDED_FUNCTIONS_PROMPTING = "{functions}\n" + ADDED_FUNCTIONS_FC
RECORDED_RESULT_CHARS = 4096  # per execution result in the record; the model sees all of it


@dataclass
class _Play:
    entry: MultiTurnEntry
    native: bool
    env: Environment
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    turns: list[list[dict[str, Any]]] = field(default_factory=list)
    completions: list[Completion] = field(default_factory=list)
    calls: int = 0
    force_terminated: bool = False
    inference_error: str | None = None
    refused_attempts: int = 0  # requests refused for the context (sent, counted in the totals)
    thinking_truncated: bool = False  # a reply cut off inside its thoughts ended the entry


async def play_multi_turn(
    entry: MultiTurnEntry,
    sampler: Sampler,
    params: SamplingParams,
    native: bool,
    env: Environment | None = None,
) -> Rollout:
    """Run every turn of ``entry`` against ``sampler``; the record holds each step.
    ``env``: instances prepared by the caller (memory), else fresh ones for ``entry``."""
    if env is None:
        env = Environment(entry.involved_classes, entry.initial_config, entry.long_context)
    if native:
        play = _Play(entry, True, env, [], native_tools(entry.functions, "python"))
    else:
        play = _Play(entry, False, env, prompt_messages(entry), None)
    for index, turn in enumerate(entry.question):
        _open_turn(play, index, turn)
        play.turns.append(await _play_turn(play, sampler, params))
        if play.force_terminated or play.inference_error or play.thinking_truncated:
            break
    return _rollout(play)


def _open_turn(play: _Play, index: int, turn: list[dict[str, Any]]) -> None:
    if index in play.entry.missed_functions:
        docs = play.entry.missed_functions[index]
        if play.native:
            assert play.tools is not None
            play.tools = play.tools + native_tools(docs, None)
            turn = [{"role": "user", "content": ADDED_FUNCTIONS_FC}]
        else:
            turn = [{"role": "user", "content": ADDED_FUNCTIONS_PROMPTING.format(functions=docs)}]
    if index > 0 or play.native:
        play.messages.extend(copy.deepcopy(turn))


async def _play_turn(play: _Play, sampler: Sampler, params: SamplingParams) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    while True:
        try:
            completion = await sampler.complete(play.messages, params, tools=play.tools)
        except ContextOverflowError as exc:
            # The conversation outgrew the model's context window. The official runner stores
            # such an entry as an inference error, which scores as wrong; so do we. Any other
            # SamplerError is infrastructure: an error of the item, raised.
            play.inference_error = str(exc)
            play.refused_attempts += exc.attempts  # the refused request was sent
            return steps
        completion = answer_only(completion)  # calls are parsed from the answer, never the thoughts
        play.completions.append(completion)
        progress.note_turn(completion)
        if not completion.reasoning_closed:  # no answer at all: the entry ends, scored incorrect
            play.thinking_truncated = True
            steps.append({"response": "", "calls": None, "results": [], "thinking_truncated": True})
            return steps
        response = _response(completion, play.native)
        play.messages.append(_assistant_message(completion, play.native, len(play.completions)))
        step: dict[str, Any] = {"response": response, "calls": None, "results": []}
        steps.append(step)
        try:
            calls = calls_from_tool_calls(response) if play.native else calls_from_text(response)
        except DecodeError as exc:
            step["decode_error"] = str(exc)
            return steps
        step["calls"] = calls
        if is_empty_step(calls):
            return steps
        results = play.env.execute(calls)
        progress.note_tool_calls(len(calls))
        play.calls += len(calls)
        step["results"] = [r[:RECORDED_RESULT_CHARS] for r in results]
        play.messages.extend(_result_messages(play, calls, results))
        if len(steps) > MAXIMUM_STEP_LIMIT:  # every step so far was executed
            play.force_terminated = True
            return steps


def _response(completion: Completion, native: bool) -> Any:
    """What the official runner stores for one step: the text, or (native, with calls)
    ``[{name: arguments JSON}]``."""
    if native and completion.tool_calls:
        return [{call.name: call.arguments} for call in completion.tool_calls]
    return completion.text


def _assistant_message(completion: Completion, native: bool, number: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": completion.text}
    if native and completion.tool_calls:
        message["tool_calls"] = [
            {
                "id": _call_id(call.id, number, i),
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for i, call in enumerate(completion.tool_calls)
        ]
    return message


def _call_id(given: str, number: int, index: int) -> str:
    return given or f"call_{number}_{index}"


def _result_messages(play: _Play, calls: list[str], results: list[str]) -> list[dict[str, Any]]:
    if not play.native:
        tool_results = [
            {"role": "tool", "name": c, "content": r} for c, r in zip(calls, results, strict=True)
        ]
        return [{"role": "user", "content": repr(tool_results)}]
    # The official handler pairs results with the ids of the assistant's calls (zip).
    ids = [call["id"] for call in play.messages[-1].get("tool_calls", [])]
    return [{"role": "tool", "content": r, "tool_call_id": i} for r, i in zip(results, ids, strict=False)]


def _rollout(play: _Play) -> Rollout:
    completions = play.completions
    last = completions[-1] if completions else None
    return Rollout(
        text=last.text if last else "",
        stop_reason=_stop_reason(play),
        finish_reason=last.finish_reason if last else "stop",
        turns=len(completions),
        code_calls=play.calls,
        prompt_tokens=sum(c.prompt_tokens for c in completions),
        completion_tokens=sum(c.completion_tokens for c in completions),
        latency_s=sum(c.latency_s for c in completions),
        attempts=sum(c.attempts for c in completions) + play.refused_attempts,
        retries=sum(max(0, c.attempts - 1) for c in completions),
        cached=bool(completions) and all(c.cached for c in completions),
        extra={
            "mt_turns": play.turns,
            "force_terminated": play.force_terminated,
            **({"inference_error": play.inference_error} if play.inference_error else {}),
        },
        reasoning=last.reasoning if last else None,
        reasoning_tokens=summed_reasoning_tokens(completions),
    )


def _stop_reason(play: _Play) -> str:
    if play.thinking_truncated:
        return THINKING_TRUNCATED
    if play.inference_error:
        return "context_exceeded"
    return "step_limit" if play.force_terminated else "answer"


def stored_result(turns: list[list[dict[str, Any]]], inference_error: str | None = None) -> Any:
    """The official ``result`` of a multi-turn entry: turn -> step -> raw reply, or (when
    inference failed) the error text the official runner stores instead."""
    if inference_error:
        return f"Error during inference: {inference_error}"
    return [[step["response"] for step in turn] for turn in turns]
