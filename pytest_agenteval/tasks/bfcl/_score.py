"""Score one model output for one entry: strict and lenient verdicts, call detection, params."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_agenteval.tasks.bfcl._checker import (
    ParamScore,
    Verdict,
    check_entry,
    contains_call,
    parameter_score,
)
from pytest_agenteval.tasks.bfcl._data import BfclEntry
from pytest_agenteval.tasks.bfcl._decode import Call, DecodeError, decode_native, decode_strict
from pytest_agenteval.tasks.bfcl._lenient import decode_lenient
from pytest_agenteval.tasks.bfcl._metrics import BfclItemResult
from pytest_agenteval.tasks.bfcl._prompt import tool_name_map


@dataclass(frozen=True)
class BfclScore:
    """Everything the metrics need about one output.

    ``verdict`` is the official (strict) one; ``predicted_call`` and ``params``
    follow the strict decoding too, so they agree with the headline verdict.
    """

    verdict: Verdict
    lenient: Verdict
    decoded: list[Call] | None
    decode_error: str | None
    predicted_call: bool
    params: ParamScore

    def item_result(self, entry: BfclEntry) -> BfclItemResult:
        return BfclItemResult(
            id=entry.id,
            category=entry.category,
            valid=self.verdict.valid,
            lenient_valid=self.lenient.valid,
            error_type=self.verdict.error_type,
            expected_call="irrelevance" not in entry.category,
            predicted_call=self.predicted_call,
            params_total=self.params.total,
            params_correct=self.params.correct,
        )


def score_text(entry: BfclEntry, text: str) -> BfclScore:
    """Score a prompting-style reply (raw text)."""
    strict, strict_error = _attempt(lambda: decode_strict(text, entry.language))
    names = [doc["name"] for doc in entry.functions]
    lenient, lenient_error = _attempt(lambda: decode_lenient(text, entry.language, names))
    return _score(entry, strict, strict_error, lenient, lenient_error)


def score_tool_calls(
    entry: BfclEntry, tool_calls: Sequence[Any] | None, content: str | None = None
) -> BfclScore:
    """Score a native function-calling reply; ``tool_calls`` is ``None`` for a text reply.

    The strict verdict decodes only the tool calls, as the official FC
    handlers do; the lenient one falls back to the text ``content``.
    """
    names = tool_name_map(entry.functions)
    strict, strict_error = _attempt(lambda: decode_native(tool_calls, names))
    lenient, lenient_error = strict, strict_error
    if tool_calls is None and content:
        raw_names = list(names.values())
        lenient, lenient_error = _attempt(lambda: decode_lenient(content, entry.language, raw_names))
    return _score(entry, strict, strict_error, lenient, lenient_error)


def _attempt(decode: Callable[[], list[Call]]) -> tuple[list[Call] | None, DecodeError | None]:
    try:
        return decode(), None
    except DecodeError as exc:
        return None, exc


def _score(
    entry: BfclEntry,
    strict: list[Call] | None,
    strict_error: DecodeError | None,
    lenient: list[Call] | None,
    lenient_error: DecodeError | None,
) -> BfclScore:
    return BfclScore(
        verdict=check_entry(entry, strict, strict_error),
        lenient=check_entry(entry, lenient, lenient_error),
        decoded=strict,
        decode_error=str(strict_error) if strict_error else None,
        predicted_call=contains_call(strict, strict_error),
        params=parameter_score(entry, strict),
    )
