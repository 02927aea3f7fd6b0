"""Score one multi-turn rollout: re-decode the recorded steps as the official
evaluator does, replay them on fresh environments, give the official verdict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_agenteval.api.records import Score
from pytest_agenteval.tasks.bfcl._mt_checker import check_multi_turn, decode_turns
from pytest_agenteval.tasks.bfcl._mt_data import MultiTurnEntry
from pytest_agenteval.tasks.bfcl._mt_rollout import stored_result

DETAIL_CHARS = 2048  # per execution result in the per-turn detail of the record


def score_multi_turn(
    entry: MultiTurnEntry, turns: Sequence[Sequence[Mapping[str, Any]]], native: bool
) -> Score:
    """``turns``: the rollout's record (turn -> step -> {"response", ...})."""
    raw = stored_result([list(t) for t in turns])  # type: ignore[arg-type]
    decoded = decode_turns(raw, native)
    verdict = check_multi_turn(entry, decoded)
    calls = sum(len(step) for turn in decoded for step in turn)
    return Score(
        correct=verdict.valid,
        formatted=calls > 0,
        answer=None,
        fields={
            "valid": verdict.valid,
            "lenient_valid": verdict.valid,  # no lenient decoder for multi-turn
            "error_type": verdict.error_type,
            "error_message": verdict.error_message,
            "failed_turn": verdict.failed_turn,
            "turn_checks": [_compact(detail) for detail in verdict.turns],
            "decode_error": None,
            "predicted_call": calls > 0,
            "expected_call": True,
            "params_total": 0,
            "params_correct": 0,
            "decoded": decoded,
        },
    )


def _compact(detail: Mapping[str, Any]) -> dict[str, Any]:
    """A turn's check for the record, with long execution results cut."""
    compact = dict(detail)
    for key in ("model_results", "expected_results"):
        compact[key] = _cut(detail[key])
    if "missing_results" in detail:
        compact["missing_results"] = _cut(detail["missing_results"])
    return compact


def _cut(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= DETAIL_CHARS else value[:DETAIL_CHARS] + "...[cut]"
    if isinstance(value, list):
        return [_cut(v) for v in value]
    return value
