"""The official BFCL multi-turn verdict (``multi_turn_checker`` of bfcl-eval 2026.3.23).

For each turn, the model's decoded calls and the ground truth's are executed
on two separate sets of fresh environment instances (each persisting across
turns). A turn with expected calls then needs:

1. at least one decoded model step (``multi_turn:empty_turn_model_response``);
2. every compared instance equal to the ground truth's: public attributes
   compared with ``!=`` (``multi_turn:instance_state_mismatch``);
3. every ground-truth execution result of the turn among the model's results of
   all turns so far, as a multiset (``multi_turn:execution_response_mismatch``).

A turn without expected calls is not checked, but its calls still run, so the
next turn's state includes them. The first failing turn decides the verdict.
Before any of that, a result with fewer turns than the ground truth (the step
limit ended the rollout) is ``multi_turn:force_terminated``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_agenteval.tasks.bfcl._decode import DecodeError
from pytest_agenteval.tasks.bfcl._mt_data import MultiTurnEntry
from pytest_agenteval.tasks.bfcl._mt_decode import calls_from_text, calls_from_tool_calls, is_empty_step
from pytest_agenteval.tasks.bfcl._mt_env import Environment, public_state

FORCE_TERMINATED = "multi_turn:force_terminated"
EMPTY_TURN = "multi_turn:empty_turn_model_response"
STATE_MISMATCH = "multi_turn:instance_state_mismatch"
RESPONSE_MISMATCH = "multi_turn:execution_response_mismatch"


@dataclass(frozen=True)
class MultiTurnVerdict:
    valid: bool
    error_type: str | None = None
    error_message: str | None = None
    failed_turn: int | None = None
    turns: tuple[dict[str, Any], ...] = field(default_factory=tuple)  # per-turn detail


def decode_turns(raw_turns: Sequence[Sequence[Any]], native: bool) -> list[list[list[str]]]:
    """The checker's decoding of a stored result: each step's raw reply to call strings;
    steps that fail to decode or decode to nothing are left out (not errors)."""
    decode = calls_from_tool_calls if native else calls_from_text
    decoded_turns = []
    for raw_steps in raw_turns:
        steps = []
        for raw in raw_steps:
            try:
                calls = decode(raw)
            except DecodeError:
                continue
            if not is_empty_step(calls):
                steps.append(calls)
        decoded_turns.append(steps)
    return decoded_turns


def check_multi_turn(
    entry: MultiTurnEntry, decoded_turns: Sequence[Sequence[Sequence[str]]]
) -> MultiTurnVerdict:
    """The official verdict on ``decoded_turns`` (turn -> step -> call strings)."""
    expected_turns = entry.ground_truth
    if len(decoded_turns) != len(expected_turns):
        return MultiTurnVerdict(
            False,
            FORCE_TERMINATED,
            "Model was force-terminated during inference phase. The length of the model result "
            f"turns ({len(decoded_turns)}) does not match the length of the ground truth turns "
            f"({len(expected_turns)}).",
        )
    model_env = Environment(entry.involved_classes, entry.initial_config, entry.long_context)
    expected_env = Environment(entry.involved_classes, entry.initial_config, entry.long_context)
    all_model_results: list[str] = []
    details: list[dict[str, Any]] = []
    for index, (steps, expected) in enumerate(zip(decoded_turns, expected_turns, strict=True)):
        model_results = [model_env.execute(list(step)) for step in steps]
        expected_results = expected_env.execute(list(expected))
        all_model_results.extend(result for step in model_results for result in step)
        detail = {
            "turn": index,
            "model_calls": [list(step) for step in steps],
            "model_results": model_results,
            "expected_calls": list(expected),
            "expected_results": expected_results,
        }
        details.append(detail)
        if not expected:
            detail["checked"] = False
            continue
        detail["checked"] = True
        failure = _check_turn(index, steps, model_env, expected_env, all_model_results, expected_results)
        if failure is not None:
            error_type, message, extra = failure
            detail.update(extra)
            return MultiTurnVerdict(False, error_type, message, index, tuple(details))
    return MultiTurnVerdict(True, turns=tuple(details))


def _check_turn(
    index: int,
    steps: Sequence[Sequence[str]],
    model_env: Environment,
    expected_env: Environment,
    all_model_results: list[str],
    expected_results: list[str],
) -> tuple[str, str, dict[str, Any]] | None:
    if not steps or is_empty_step(steps):
        return EMPTY_TURN, f"Model response list is empty for turn {index}", {}
    for class_name, expected_instance in expected_env.instances.items():
        differences = state_differences(model_env.instances[class_name], expected_instance)
        if differences:
            message = f"Model instance for {class_name} does not match the state with ground truth instance."
            return STATE_MISMATCH, message, {"state_differences": {class_name: sorted(differences)}}
    missing = missing_results(expected_results, all_model_results)
    if missing:
        message = (
            "Model response execution results so far does not contain all the ground truth response "
            f"execution results for turn {index}."
        )
        return RESPONSE_MISMATCH, message, {"missing_results": missing}
    return None


def state_differences(model_instance: Any, expected_instance: Any) -> dict[str, dict[str, Any]]:
    """``_compare_instances``: the expected instance's public attributes that differ."""
    differences = {}
    for name, expected in public_state(expected_instance).items():
        actual = getattr(model_instance, name)
        if actual != expected:
            differences[name] = {"model": actual, "ground_truth": expected}
    return differences


def missing_results(expected: Sequence[str], actual: Sequence[str]) -> list[str]:
    """``_is_subsequence_unordered``: expected results not found in ``actual`` (multiset)."""
    remaining = list(actual)
    missing = []
    for item in expected:
        try:
            remaining.remove(item)
        except ValueError:
            missing.append(item)
    return missing
