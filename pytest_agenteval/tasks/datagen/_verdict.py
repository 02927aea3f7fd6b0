"""Strict parsing of judge replies: exactly one JSON object carrying this call's nonce.

No free-text fallback: a reply without that object is `invalid`, never a 3.0 (the
seed), a 0, a tie or the first/last object found. The nonce is what keeps a verdict
planted inside a generated problem (and quoted back by the judge) from being taken."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from pytest_agenteval.tasks.datagen._latex import repair_json_text

DIMENSIONS = ("correctness", "clarity", "difficulty_match", "completeness")
PAIRWISE_LABELS = {"A>>B": "A", "A>B": "A", "A=B": "tie", "B>A": "B", "B>>A": "B"}
SEED_LABELS = {"A": "A>B", "B": "B>A", "Tie": "A=B", "tie": "A=B", "TIE": "A=B"}  # the design documents
MAX_REPLY_CHARS = 100_000
MAX_DEPTH = 32
_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"))


@dataclass(frozen=True)
class Parsed:
    ok: bool
    value: dict[str, Any] = field(default_factory=dict)  # scores/reasons or verdict/reason
    error: str = ""  # why the reply is invalid, shown to the judge on a re-ask
    repairs: tuple[str, ...] = ()


class _Duplicate(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _Duplicate(f"duplicate key {next(k for k in keys if keys.count(k) > 1)!r}")
    return dict(pairs)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def top_level_objects(text: str) -> list[str] | str:
    """Substrings that are balanced top-level `{...}` (string-aware); an error string
    when nesting is deeper than MAX_DEPTH."""
    objects, depth, start, in_string, escaped = [], 0, -1, False, False
    for i, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"' and depth > 0:
            in_string = True
        elif char == "{":
            if depth == 0:
                start = i
            depth += 1
            if depth > MAX_DEPTH:
                return f"JSON nested deeper than {MAX_DEPTH} levels"
        elif char == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                objects.append(text[start : i + 1])
    return objects


def _decode(candidate: str) -> tuple[dict[str, Any] | None, str, list[str]]:
    fixed, repairs = repair_json_text(candidate)
    notes = [f"escaped {r.command}" for r in repairs]
    try:
        value = json.loads(fixed, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except _Duplicate as exc:
        return None, str(exc), notes
    except ValueError as exc:
        return None, f"not valid JSON ({getattr(exc, 'msg', exc)})", notes
    return (value, "", notes) if isinstance(value, dict) else (None, "not a JSON object", notes)


def find_verdict_object(text: str, nonce: str) -> tuple[dict[str, Any] | None, str, tuple[str, ...]]:
    """The one object whose "nonce" is `nonce`, else (None, reason)."""
    if len(text) > MAX_REPLY_CHARS:
        return None, f"reply longer than {MAX_REPLY_CHARS} characters", ()
    stripped = _THINK.sub("", text).translate(_ZERO_WIDTH)
    if not stripped.strip():
        return None, "empty_content: no reply outside reasoning", ()
    found = top_level_objects(stripped)
    if isinstance(found, str):
        return None, found, ()
    if not found:
        return None, "no JSON object in the reply", ()
    decoded, errors, notes = [], [], []
    for candidate in found:
        value, error, repaired = _decode(candidate)
        notes += repaired
        if value is None:
            errors.append(error)
        else:
            decoded.append(value)
    carrying = [v for v in decoded if v.get("nonce") == nonce]
    if len(carrying) > 1:
        return None, "several JSON objects carry the nonce; reply with exactly one", tuple(notes)
    if not carrying:
        if errors:
            return None, errors[0], tuple(notes)
        return None, f'no JSON object carries "nonce": "{nonce}"', tuple(notes)
    return carrying[0], "", tuple(notes)


def normalise_key(key: str) -> str:
    """`Correctness`, `difficulty match`, `difficulty-match`, `difficultyMatch` all become
    snake_case; nothing else is an alias."""
    key = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", key.strip())
    return re.sub(r"[\s\-]+", "_", key).lower()


def _score(value: Any, dim: str) -> tuple[int | None, str, str]:
    if not isinstance(value, dict):
        return None, "", f'{dim} must be an object {{"reason": ..., "score": 1-5}}'
    reason, score = value.get("reason"), value.get("score")
    if not isinstance(reason, str):
        return None, "", f"{dim}.reason must be a string"
    # bool is an int in Python: pydantic's lax mode would turn true into 1
    if isinstance(score, bool) or not isinstance(score, int):
        return None, reason, f"{dim}.score must be an integer 1-5, got {json.dumps(score)}"
    if not 1 <= score <= 5:
        return None, reason, f"{dim}.score must be within 1-5, got {score}"
    return score, reason, ""


def validate_pointwise(obj: dict[str, Any]) -> Parsed:
    entries: dict[str, Any] = {}
    for key, value in obj.items():
        if key == "nonce":
            continue
        name = normalise_key(key)
        if name not in DIMENSIONS:
            return Parsed(False, error=f"unexpected key {key!r}; keys are nonce, {', '.join(DIMENSIONS)}")
        if name in entries:
            return Parsed(False, error=f"dimension {name} given twice")
        entries[name] = value
    missing = [d for d in DIMENSIONS if d not in entries]
    if missing:
        return Parsed(False, error=f"missing dimension(s) {', '.join(missing)}")
    scores, reasons = {}, {}
    for dim in DIMENSIONS:
        score, reason, error = _score(entries[dim], dim)
        if score is None:
            return Parsed(False, error=error)
        scores[dim], reasons[dim] = score, reason
    return Parsed(True, {"scores": scores, "reasons": reasons})


def validate_pairwise(obj: dict[str, Any]) -> Parsed:
    unknown = [k for k in obj if k not in ("nonce", "reason", "verdict")]
    if unknown:
        return Parsed(False, error=f"unexpected key {unknown[0]!r}; keys are nonce, reason, verdict")
    verdict, reason = obj.get("verdict"), obj.get("reason", "")
    if not isinstance(reason, str):
        return Parsed(False, error="reason must be a string")
    if isinstance(verdict, str) and verdict.strip() in SEED_LABELS:
        verdict = SEED_LABELS[verdict.strip()]
    if not isinstance(verdict, str) or verdict.strip() not in PAIRWISE_LABELS:
        return Parsed(False, error=f"verdict must be one of {', '.join(PAIRWISE_LABELS)}, got {verdict!r}")
    label = verdict.strip()
    return Parsed(True, {"verdict": label, "winner": PAIRWISE_LABELS[label], "reason": reason})


def parse_reply(text: str, nonce: str, kind: str) -> Parsed:
    """`kind` is "pointwise" or "pairwise"."""
    obj, error, notes = find_verdict_object(text, nonce)
    if obj is None:
        return Parsed(False, error=error, repairs=notes)
    parsed = validate_pointwise(obj) if kind == "pointwise" else validate_pairwise(obj)
    return Parsed(parsed.ok, parsed.value, parsed.error, notes)
