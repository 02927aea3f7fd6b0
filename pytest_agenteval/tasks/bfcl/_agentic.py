"""Play and score BFCL agentic entries (memory, web search) as the official runner does.

Memory: before its first question, a scenario's prerequisite conversations are played in
order with the same loop as multi-turn; after each one the memory backend writes its
snapshot (``_flush_memory_to_local_file``), which the next one and every question load
(``_load_scenario``). Each conversation and question starts with the official memory
system prompt holding the core memory. A chain runs once per (category, scenario, sample,
style) in a process, in its own scratch folder; its requests use a seed of their own,
so chains played in other xdist workers send the same requests (and hit the cache).

Score: the last step of the answer that is not a call must contain one of the possible
answers after the official normalisation (``agentic_checker``).
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_agenteval.api.records import Rollout, Score
from pytest_agenteval.models import Sampler, SamplingParams
from pytest_agenteval.tasks.bfcl._agentic_data import AgenticEntry, Conversation
from pytest_agenteval.tasks.bfcl._decode import DecodeError
from pytest_agenteval.tasks.bfcl._mt_data import MultiTurnEntry
from pytest_agenteval.tasks.bfcl._mt_decode import calls_from_text, calls_from_tool_calls, is_empty_step
from pytest_agenteval.tasks.bfcl._mt_env import Environment
from pytest_agenteval.tasks.bfcl._mt_rollout import play_multi_turn

NO_LAST_MESSAGE = "agentic:no_last_message"
ANSWER_NOT_FOUND = "agentic:answer_not_found"

_chains: dict[tuple[str, ...], Path] = {}
_locks: dict[tuple[str, ...], asyncio.Lock] = {}
_scratch: list[str] = []


def forget_memory() -> None:
    """A new session plays its own prerequisite conversations: the memory a last session
    in this process (pytest.main called again) left is not this run's."""
    _chains.clear()
    _locks.clear()


def memory_prompt(category: str, scenario: str, instance: Any) -> str:
    """``add_memory_instruction_system_prompt``: the scenario and the core memory."""
    from bfcl_eval.constants.default_prompts import (
        MEMORY_AGENT_SETTINGS,
        MEMORY_BACKEND_INSTRUCTION_CORE_ARCHIVAL,
        MEMORY_BACKEND_INSTRUCTION_UNIFIED,
    )

    unified = "rec_sum" in category
    template = MEMORY_BACKEND_INSTRUCTION_UNIFIED if unified else MEMORY_BACKEND_INSTRUCTION_CORE_ARCHIVAL
    return template.format(
        scenario_setting=MEMORY_AGENT_SETTINGS[scenario],
        memory_content=instance._dump_core_memory_to_context(),
    )


def _with_system(question: list[list[dict[str, Any]]], prompt: str) -> list[list[dict[str, Any]]]:
    turns = [list(turn) for turn in question]
    first = turns[0]
    if first and first[0]["role"] == "system":
        first[0] = {**first[0], "content": f"{prompt}\n\n{first[0]['content']}"}
    else:
        first.insert(0, {"role": "system", "content": prompt})
    return turns


def _memory_env(entry: AgenticEntry, test_id: str, folder: Path) -> Environment:
    config = {"model_result_dir": folder, "scenario": entry.scenario, "test_id": test_id}
    return Environment([entry.environment], {entry.environment: {**config, "test_category": entry.category}})


def _as_multi_turn(entry: AgenticEntry, test_id: str, question: list, env: Environment) -> MultiTurnEntry:
    return MultiTurnEntry(
        id=test_id,
        category=entry.category,
        question=question,
        functions=entry.functions,
        missed_functions={},
        initial_config={},
        involved_classes=list(env.instances),
        ground_truth=[],
    )


async def _play_memory_turns(
    entry: AgenticEntry, test_id: str, question: list, folder: Path, play: Callable[..., Any]
) -> Rollout:
    env = _memory_env(entry, test_id, folder)
    (instance,) = env.instances.values()
    question = _with_system(question, memory_prompt(entry.category, entry.scenario or "", instance))
    rollout = await play(_as_multi_turn(entry, test_id, question, env), env)
    return rollout


async def ensure_memory(
    entry: AgenticEntry, sampler: Sampler, params: SamplingParams, native: bool, sample: int
) -> tuple[Path, dict[str, Any]]:
    """The folder holding the scenario's memory after its prerequisite conversations."""
    key = (sampler.identity.name, entry.category, entry.scenario or "", str(sample), str(native))
    lock = _locks.setdefault(key, asyncio.Lock())
    async with lock:
        if key in _chains:
            return _chains[key], {"prerequisites": len(entry.prerequisites), "played_here": False}
        folder = Path(tempfile.mkdtemp(prefix="agenteval-bfcl-memory-"))
        if not _scratch:
            atexit.register(lambda: [shutil.rmtree(p, ignore_errors=True) for p in _scratch])
        _scratch.append(str(folder))
        stats = {"prerequisites": len(entry.prerequisites), "played_here": True}
        counts = dict.fromkeys(("requests", "calls", "prompt_tokens", "completion_tokens"), 0)
        for conversation in entry.prerequisites:
            rollout = await _play_prerequisite(entry, conversation, folder, sampler, params, native)
            counts["requests"] += rollout.turns
            counts["calls"] += rollout.code_calls
            counts["prompt_tokens"] += rollout.prompt_tokens
            counts["completion_tokens"] += rollout.completion_tokens
        stats.update(counts)
        _chains[key] = folder
        return folder, stats


async def _play_prerequisite(
    entry: AgenticEntry,
    conversation: Conversation,
    folder: Path,
    sampler: Sampler,
    params: SamplingParams,
    native: bool,
) -> Rollout:
    holder: list[Environment] = []

    async def play(mt_entry: MultiTurnEntry, env: Environment) -> Rollout:
        holder.append(env)
        return await play_multi_turn(mt_entry, sampler, params, native, env=env)

    rollout = await _play_memory_turns(entry, conversation.id, conversation.question, folder, play)
    (instance,) = holder[0].instances.values()
    instance._flush_memory_to_local_file()
    return rollout


async def play_agentic(
    entry: AgenticEntry,
    sampler: Sampler,
    params: SamplingParams,
    chain_params: SamplingParams,
    native: bool,
    sample: int,
    environment_config: Mapping[str, Any] | None = None,
) -> Rollout:
    """One question: (memory) the prerequisites first, then the question itself."""

    async def play(mt_entry: MultiTurnEntry, env: Environment) -> Rollout:
        return await play_multi_turn(mt_entry, sampler, params, native, env=env)

    if entry.scenario is not None:
        folder, stats = await ensure_memory(entry, sampler, chain_params, native, sample)
        rollout = await _play_memory_turns(entry, entry.id, entry.question, folder, play)
        return dataclasses.replace(rollout, extra={**rollout.extra, "memory_chain": stats})
    env = Environment([entry.environment], {entry.environment: dict(environment_config or {})})
    return await play(_as_multi_turn(entry, entry.id, entry.question, env), env)


def score_agentic(entry: AgenticEntry, turns: Sequence[Sequence[Mapping[str, Any]]], native: bool) -> Score:
    """``_evaluate_single_agentic_entry`` + ``agentic_checker`` on the recorded steps."""
    decode = calls_from_tool_calls if native else calls_from_text
    last_message, calls = None, 0
    for step in turns[0] if turns else []:
        try:
            decoded = decode(step["response"])
        except DecodeError:
            last_message = step["response"]
            continue
        if is_empty_step(decoded):
            last_message = step["response"]
            continue
        calls += len(decoded)
    if last_message is None:
        valid, error_type = False, NO_LAST_MESSAGE
    else:
        valid = answer_found(last_message, entry.answers)
        error_type = None if valid else ANSWER_NOT_FOUND
    return Score(
        correct=valid,
        formatted=last_message is not None,
        answer=None,
        fields={
            "valid": valid,
            "lenient_valid": valid,
            "error_type": error_type,
            "decode_error": None,
            "final_answer": last_message if isinstance(last_message, str) else None,
            "predicted_call": calls > 0,
            "expected_call": True,
            "params_total": 0,
            "params_correct": 0,
        },
    )


def answer_found(response: Any, answers: Sequence[str]) -> bool:
    """``agentic_checker``: a possible answer as a whole word of the normalised response."""
    if type(response) is list:
        response = response[0]
    text = _standardize(response if type(response) is str else str(response))
    return any(re.search(rf"\b{re.escape(_standardize(answer))}\b", text) for answer in answers)


def _standardize(text: str) -> str:
    return re.sub(r"[\,\.\/\-\_\*\^\(\)]", "", text).lower().replace("'", '"')
