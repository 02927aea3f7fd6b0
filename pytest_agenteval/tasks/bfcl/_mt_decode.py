"""Turn one model step into the official execution list: call strings such as
``cd(folder='document')``.

Prompting replies go through the official prompting decoder (``decode_strict``)
and then ``decoded_output_to_execution_list``; native tool calls through
``convert_to_function_call``. Both are reproduced here with their quirks (a
dict argument whose values are all dicts renders as a nested call; an empty
one fails), because the strings are what gets executed and compared.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_agenteval.tasks.bfcl._decode import DecodeError, decode_strict


def calls_from_text(text: str) -> list[str]:
    """``default_decode_execute_prompting``; raises ``DecodeError`` where it raises."""
    decoded = decode_strict(text, "python")
    try:
        return execution_list(decoded)
    except (IndexError, AttributeError, TypeError) as exc:
        raise DecodeError(f"cannot render the calls: {exc}") from None


def calls_from_tool_calls(tool_calls: Sequence[Mapping[str, Any]] | str | None) -> list[str]:
    """``convert_to_function_call`` of the OpenAI FC handler.

    ``tool_calls`` is the official stored result: ``[{name: arguments JSON}]``,
    or the reply text (``str``) when the model made no call, which fails.
    """
    if tool_calls is None or isinstance(tool_calls, str):
        raise DecodeError("the reply has no tool calls")
    if isinstance(tool_calls, Mapping):
        tool_calls = [tool_calls]
    calls = []
    try:
        for call in tool_calls:
            for name, arguments in call.items():
                if type(arguments) is str:
                    arguments = json.loads(arguments)
                rendered = ",".join(f"{k}={v!r}" for k, v in arguments.items())
                calls.append(f"{name}({rendered})")
    except (json.JSONDecodeError, AttributeError, TypeError) as exc:
        raise DecodeError(f"tool call arguments are not a JSON object: {exc}") from None
    return calls


def execution_list(decoded: Sequence[Mapping[str, Mapping[str, Any]]]) -> list[str]:
    """``decoded_output_to_execution_list``: ``[{name: {k: v}}]`` -> ``["name(k=v)"]``."""
    calls = []
    for call in decoded:
        for name, arguments in call.items():
            rendered = ", ".join(f"{k}={nested_value(v)}" for k, v in arguments.items())
            calls.append(f"{name}({rendered})")
    return calls


def nested_value(value: Any) -> str:
    """``parse_nested_value``: a dict of dicts is a nested call, other dicts render with
    quoted keys, everything else is ``repr``."""
    if isinstance(value, dict):
        if all(isinstance(v, dict) for v in value.values()):
            name = list(value.keys())[0]  # IndexError for {}, as officially
            rendered = ", ".join(f"{k}={nested_value(v)}" for k, v in value[name].items())
            return f"{name}({rendered})"
        return "{" + ", ".join(f"'{k}': {nested_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


def is_empty_step(calls: Sequence[Any]) -> bool:
    """``is_empty_execute_response``: no call, or a single empty one."""
    return len(calls) == 0 or (len(calls) == 1 and len(calls[0]) == 0)
