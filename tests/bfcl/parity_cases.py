"""Model outputs for the BFCL parity test, built from the official data.

``generate_cases`` builds, from every entry, outputs a model could write:
oracle-correct calls (allowed values chosen at random, optional parameters
omitted, ints for floats, tuples, nested dicts, lists of dicts) and many kinds
of wrong ones: names, missing/extra/mistyped/mis-valued parameters, wrong call
counts and orders, unparseable text, prose, fences, JSON, refusals, Java and
JavaScript source text, and native tool calls. A fixed seed makes the set
deterministic.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

from pytest_agenteval.tasks.bfcl import BfclEntry, tool_name_map

from .parity_mutations import (
    PY_MUTATIONS,
    SOURCE_MUTATIONS,
    TEXT_MUTATIONS,
    ValueCall,
    as_json,
    case_rng,
    find_doc,
    oracle_params,
    oracle_value,
    render_source_calls,
    render_value_calls,
    shuffled,
    source_oracle,
    typed_edit_value,
)


@dataclass(frozen=True)
class Case:
    entry_id: str
    kind: str
    output: Any  # raw text, or a list of tool calls (None: a text reply) when `native`
    native: bool = False


# ---------------------------------------------------------------- relevance outputs


def _fake_value(schema: dict[str, Any]) -> Any:
    return {"integer": 3, "float": 2.5, "boolean": True, "array": ["a"], "dict": {"k": "v"}}.get(
        schema.get("type"), "value"
    )


def relevance_outputs(entry: BfclEntry, rng: random.Random) -> dict[str, str]:
    doc = rng.choice(entry.functions) if entry.functions else {"name": "f", "parameters": {}}
    properties = doc["parameters"].get("properties", {})
    params = {p: _fake_value(s) for p, s in list(properties.items())[:3]}
    call = render_value_calls([(doc["name"], params)], rng)
    return {
        "refusal": rng.choice(["I'm sorry, none of the functions fit.", "No function applies."]),
        "empty": "",
        "empty_list": "[]",
        "none": "None",
        "call": call,
        "zero_arg_call": f"[{doc['name']}()]",
        "prose_with_call": f"You could call {call} for that.",
        "fenced_call": f"```python\n{call}\n```",
        "plain_fence": f"```\n{call}\n```",
        "json_call": json.dumps([{"name": doc["name"], "arguments": params}]),
        "call_with_reason": f"{call[1:-1]} because the user asked",
        "bare_words": "weather",
        "empty_dict": "[{}]",
    }


# ---------------------------------------------------------------- native outputs


def native_case(entry: BfclEntry, calls: list[ValueCall], kind: str, rng: random.Random) -> Case:
    """Tool calls as an OpenAI-compatible server returns them (names sanitised)."""
    sanitised = {original: tool for tool, original in tool_name_map(entry.functions).items()}
    tool_calls: list[dict[str, Any]] | None = []
    for index, (name, params) in enumerate(calls):
        arguments = json.dumps(as_json(params))
        if kind == "native_bad_json":
            arguments = arguments[:-1]
        elif kind == "native_list_arguments":
            arguments = json.dumps(list(params.values()))
        function = {"name": sanitised.get(name, name), "arguments": arguments}
        tool_calls.append({"id": f"call_{index}", "type": "function", "function": function})
    if kind == "native_text_reply":
        tool_calls = None
    return Case(entry.id, kind, tool_calls, native=True)


# ---------------------------------------------------------------- the case set

# Mutations per entry: more for small categories, fewer for the 1053 live_multiple entries.
MUTATIONS_PER_ENTRY = {
    "simple_python": 9,
    "simple_java": 14,
    "simple_javascript": 16,
    "multiple": 8,
    "parallel": 9,
    "parallel_multiple": 9,
    "live_simple": 8,
    "live_multiple": 4,
    "live_parallel": 14,
    "live_parallel_multiple": 14,
}


def generate_cases(entries: list[BfclEntry]) -> list[Case]:
    """The deterministic case set: a fixed seed, one random stream per entry."""
    cases: list[Case] = []
    for entry in entries:
        rng = case_rng(entry.id)
        if entry.ground_truth is None:
            outputs = relevance_outputs(entry, rng)
            count = 10 if entry.category == "live_relevance" else 3
            for kind in rng.sample(sorted(outputs), count):
                cases.append(Case(entry.id, kind, outputs[kind]))
            if entry.functions and rng.random() < 0.3:
                cases.append(native_case(entry, [(entry.functions[0]["name"], {})], "native", rng))
        elif entry.language == "python":
            cases.extend(_python_cases(entry, rng))
        else:
            cases.extend(_source_cases(entry, rng))
    return cases


def _python_cases(entry: BfclEntry, rng: random.Random) -> list[Case]:
    cases = []
    for _ in range(2):
        oracle = _oracle_calls(entry, rng)
        cases.append(Case(entry.id, "oracle", render_value_calls(oracle, rng)))
    kinds = sorted(PY_MUTATIONS) + sorted(TEXT_MUTATIONS)
    for kind in rng.sample(kinds, MUTATIONS_PER_ENTRY[entry.category]):
        oracle = _oracle_calls(entry, rng)
        if kind in TEXT_MUTATIONS:
            output: Any = TEXT_MUTATIONS[kind](render_value_calls(oracle, rng), rng)
        else:
            output = PY_MUTATIONS[kind](entry, oracle, rng)
            if output is None:
                continue
            if not isinstance(output, str):
                output = render_value_calls(output, rng)
        cases.append(Case(entry.id, kind, output))
    cases.extend(_focused_cases(entry, rng))
    native_kind = rng.choice(
        ["native", "native", "native_bad_json", "native_list_arguments", "native_text_reply"]
    )
    cases.append(native_case(entry, _oracle_calls(entry, rng), native_kind, rng))
    return cases


_FOCUS_TYPES = ("dict", "array", "tuple", "float")


def _focused_cases(entry: BfclEntry, rng: random.Random) -> list[Case]:
    """Edits aimed at the structured rules: dicts, lists of dicts, nested item types."""
    cases = []
    for position, expected in enumerate(entry.ground_truth or []):
        ((name, options),) = expected.items()
        properties = find_doc(entry, name)["parameters"].get("properties", {})
        for param in options:
            declared = properties.get(param, {}).get("type")
            if declared not in _FOCUS_TYPES:
                continue
            for _ in range(2):
                calls = _oracle_calls(entry, rng, shuffle=False)
                value = oracle_value(options[param], properties[param], rng)
                calls[position][1][param] = typed_edit_value(value, declared, rng)
                cases.append(Case(entry.id, f"focus_{declared}", render_value_calls(calls, rng)))
    return cases


def _oracle_calls(entry: BfclEntry, rng: random.Random, shuffle: bool = True) -> list[ValueCall]:
    calls = [
        (name, oracle_params(options, find_doc(entry, name), rng))
        for expected in entry.ground_truth or []
        for name, options in expected.items()
    ]
    return shuffled(calls, rng) if shuffle and len(calls) > 1 and rng.random() < 0.3 else calls


def _source_cases(entry: BfclEntry, rng: random.Random) -> list[Case]:
    cases = []
    for _ in range(3):
        text = render_source_calls(source_oracle(entry, rng))
        cases.append(Case(entry.id, "oracle", text))
    kinds = sorted(SOURCE_MUTATIONS) + sorted(TEXT_MUTATIONS)
    for kind in rng.sample(kinds, MUTATIONS_PER_ENTRY[entry.category]):
        oracle = source_oracle(entry, rng)
        if kind in TEXT_MUTATIONS:
            output = TEXT_MUTATIONS[kind](render_source_calls(oracle), rng)
        else:
            mutated = SOURCE_MUTATIONS[kind](entry, oracle, rng)
            if mutated is None:
                continue
            output = render_source_calls(mutated)
        cases.append(Case(entry.id, kind, output))
    if rng.random() < 0.5:
        calls = [(name, dict(args)) for name, args in source_oracle(entry, rng)]
    else:
        calls = _oracle_calls(entry, rng)  # JSON-typed values, not source text
    cases.append(native_case(entry, calls, "native", rng))
    return cases
