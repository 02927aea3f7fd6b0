"""Lenient extraction of function calls from free-form model output.

The headline BFCL verdict uses the official (strict) decoder. This decoder
reports what the model meant: it also accepts JSON calls, fenced code blocks,
tool-call tags, reasoning blocks and calls embedded in prose. Anything the
strict decoder accepts is decoded identically.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Collection, Iterator
from typing import Any

from pytest_agenteval.tasks.bfcl._decode import (
    Call,
    DecodeError,
    call_name,
    decode_python_calls,
    decode_strict,
    is_call_list,
)

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[\w+-]*[ \t]*\n?(.*?)```", re.DOTALL)
_TAGS = re.compile(r"<(tool_call|toolcall|function_call)>(.*?)</\1>", re.DOTALL | re.IGNORECASE)
_CALL_START = {
    "python": re.compile(r"(?<![\w.])([A-Za-z_][\w.]*)\s*\("),
    "java": re.compile(r"(?<![\w.$])([A-Za-z_$][\w.$]*)\s*\("),
    "javascript": re.compile(r"(?<![\w.$])([A-Za-z_$][\w.$]*)\s*\("),
}
_MAX_SCANS = 200  # bounds the work on long outputs


def decode_lenient(
    text: str, language: str = "python", function_names: Collection[str] | None = None
) -> list[Call]:
    """Strict decoding first; then fenced blocks, tags, JSON, and calls inside prose.

    ``function_names`` (the entry's functions) restricts calls found inside
    prose to known names; without it, only calls with keyword arguments count.
    Raises the strict ``DecodeError`` when nothing call-like is found.
    """
    try:
        return decode_strict(text, language)
    except DecodeError as exc:
        strict_error = exc
    cleaned = _THINK.sub("", text)
    for segment in _segments(cleaned):
        calls = _decode_segment(segment, language)
        if calls:
            return calls
    calls = _embedded_json(cleaned, language) or _embedded_calls(cleaned, language, function_names)
    if calls:
        return calls
    raise strict_error


def _segments(text: str) -> Iterator[str]:
    yield from (match.group(1) for match in _FENCE.finditer(text))
    yield from (match.group(2) for match in _TAGS.finditer(text))
    yield text


def _decode_segment(segment: str, language: str) -> list[Call] | None:
    try:
        return decode_strict(segment, language)
    except DecodeError:
        pass
    try:
        return json_calls(json.loads(segment), language)
    except (ValueError, RecursionError):
        return None


def json_calls(value: Any, language: str = "python") -> list[Call] | None:
    """Calls from a JSON value: a list of call objects or a single one, else ``None``.

    A call object is ``{"name", "arguments"|"parameters"}``, ``{"function": name,
    "parameters"|"arguments"}``, an OpenAI tool call ``{"function": {"name",
    "arguments"}}``, ``{"tool_calls": [...]}``, or the official ``{name: {params}}``.
    Arguments may be a JSON string.
    """
    if isinstance(value, dict) and isinstance(value.get("tool_calls"), list):
        value = value["tool_calls"]
    items = value if isinstance(value, list) else [value]
    calls = [_json_call(item, language) for item in items]
    if not items or any(call is None for call in calls):
        return None
    return calls


def _json_call(item: Any, language: str) -> Call | None:
    if not isinstance(item, dict):
        return None
    function = item.get("function")
    if isinstance(function, dict):
        item = function
    name = item.get("name", function if isinstance(function, str) else None)
    arguments = item.get("arguments", item.get("parameters"))
    if name is None and len(item) == 1:
        ((name, arguments),) = item.items()  # the official {name: {params}}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return None
    if not isinstance(name, str) or not isinstance(arguments, dict):
        return None
    if language != "python":
        arguments = {key: _source_text(value) for key, value in arguments.items()}
    return {name: arguments}


def _source_text(value: Any) -> str:
    """Java/JavaScript checking expects source text; render JSON values as literals."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return json.dumps(value)


def _embedded_json(text: str, language: str) -> list[Call] | None:
    decoder = json.JSONDecoder()
    starts = [m.start() for m in re.finditer(r"[\[{]", text)][:_MAX_SCANS]
    for start in starts:
        try:
            value, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        calls = json_calls(value, language)
        if calls:
            return calls
    return None


def _embedded_calls(text: str, language: str, function_names: Collection[str] | None) -> list[Call] | None:
    """Call expressions inside prose, left to right, outermost only."""
    calls: list[Call] = []
    end_of_last = 0
    for match in list(_CALL_START[language].finditer(text))[:_MAX_SCANS]:
        if match.start() < end_of_last:
            continue  # inside a call already taken (a nested call is a value)
        end = _closing_paren(text, match.end() - 1)
        if end is None:
            continue
        candidate = text[match.start() : end + 1]
        call = _candidate_call(candidate, match.group(1), language, function_names)
        if call is not None:
            calls.append(call)
            end_of_last = end + 1
    return calls or None


def _candidate_call(
    candidate: str, name: str, language: str, function_names: Collection[str] | None
) -> Call | None:
    if function_names is not None and name not in function_names:
        return None
    try:
        if language == "python":
            node = ast.parse(candidate, mode="eval").body
            if not isinstance(node, ast.Call) or call_name(node.func) != name:
                return None
            # Without known names, only keyword calls look like intended tool calls.
            if function_names is None and (node.args or not node.keywords):
                return None
            (call,) = decode_python_calls(candidate)
            return call
        decoded = decode_strict(candidate, language)
    except (DecodeError, SyntaxError, ValueError, RecursionError):
        return None
    if not is_call_list(decoded) or len(decoded) != 1 or name not in decoded[0]:
        return None
    if function_names is None and not next(iter(decoded[0].values())):
        return None
    return decoded[0]


def _closing_paren(text: str, start: int) -> int | None:
    """Index of the parenthesis closing ``text[start]``, skipping quoted strings."""
    depth, quote, index = 0, "", start
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "\"'`":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return index if char == ")" else None
        index += 1
    return None
