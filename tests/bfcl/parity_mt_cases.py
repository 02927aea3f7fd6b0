"""Generated multi-turn trajectories for the parity test.

Every trajectory is what the official runner stores for a multi-turn entry:
turns of steps of raw model replies (text for prompting, ``[{name: arguments
JSON}]`` for native calls). They start from the ground truth and change it the
ways models do: one call per turn mutated (value or type), dropped or
duplicated, extra steps, unknown or forbidden functions, chatter, an empty
turn, a run cut short by the step limit.
"""

from __future__ import annotations

import ast
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pytest_agenteval.tasks.bfcl._mt_data import MultiTurnEntry


@dataclass(frozen=True)
class Call:
    name: str
    positional: tuple[str, ...]  # source text (the prompting decoder drops these)
    keywords: dict[str, Any]


@dataclass(frozen=True)
class MultiTurnCase:
    kind: str
    native: bool
    turns: list[list[Any]]


def parse_call(source: str) -> Call:
    node = ast.parse(source, mode="eval").body
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name), source
    keywords = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
    return Call(node.func.id, tuple(ast.unparse(a) for a in node.args), keywords)


def render_text(calls: list[Call]) -> str:
    parts = [
        f"{c.name}({', '.join([*c.positional, *(f'{k}={v!r}' for k, v in c.keywords.items())])})"
        for c in calls
    ]
    return "[" + ", ".join(parts) + "]"


def render_native(calls: list[Call]) -> list[dict[str, str]]:
    return [{c.name: json.dumps(c.keywords)} for c in calls]


def _mutate_value(value: Any, rng: random.Random) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.choice([1, -1, 10])
    if isinstance(value, float):
        return value * 2 + 1
    if isinstance(value, str):
        return rng.choice([value + "x", value.upper(), "", value[:-1] or "z"])
    if isinstance(value, list):
        return value[:-1] if value else ["x"]
    return "changed"


def _wrong_type(value: Any, rng: random.Random) -> Any:
    if isinstance(value, str):
        return rng.choice([1, [value], None])
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)


def _change_argument(call: Call, rng: random.Random, change: Callable[[Any, random.Random], Any]) -> Call:
    if not call.keywords:
        return Call(call.name, (), {"unexpected": 1})
    key = rng.choice(sorted(call.keywords))
    return Call(call.name, call.positional, {**call.keywords, key: change(call.keywords[key], rng)})


def _per_turn(kind: str, calls: list[Call], rng: random.Random, methods: list[str]) -> list[list[Call]]:
    """The steps of one turn with ``kind`` applied (each inner list is one step)."""
    if not calls:
        return [[Call(rng.choice(methods), (), {})]] if kind == "extra_steps" and rng.random() < 0.5 else []
    index = rng.randrange(len(calls))
    if kind == "mutate_value":
        calls = [*calls[:index], _change_argument(calls[index], rng, _mutate_value), *calls[index + 1 :]]
    elif kind == "wrong_type":
        calls = [*calls[:index], _change_argument(calls[index], rng, _wrong_type), *calls[index + 1 :]]
    elif kind == "drop":
        calls = calls[:index] + calls[index + 1 :]
    elif kind == "duplicate":
        calls = [*calls[: index + 1], calls[index], *calls[index + 1 :]]
    elif kind == "unknown_function":
        bad = rng.choice([Call("not_a_function", (), {"x": 1}), Call("exit", (), {"code": 0})])
        calls = [*calls[:index], bad, *calls[index:]]
    if kind == "one_call_per_step":
        return [[c] for c in calls]
    if kind == "extra_steps":
        return [calls, [Call(rng.choice(methods), (), {})], [calls[-1]]]
    return [calls] if calls else []


# Replies the official decoder and executor treat in odd ways (first method of the entry
# substituted for {m}): nested calls with and without keywords, dict arguments rendered as
# calls or literals, an empty dict (fails to render), broken syntax, attribute calls,
# positional arguments (dropped by the decoder), forbidden and unknown names.
ODD_TEXT = (
    "[{m}(x={m}())]",
    "[{m}(x={m}(y=1))]",
    "[{m}(x={{'a': {{'b': 1}}}})]",
    "[{m}(x={{'a': 1, 'b': [1, 2]}})]",
    "[{m}(x={{}})]",
    "[{m}(x={{'a': {{}}}})]",
    "[{m}(x='unclosed)]",
    "[os.{m}(x=1)]",
    "[{m}('positional')]",
    "[exit(code=1), {m}()]",
    "[print(text='hi')]",
    "```\n[{m}()]\n```",
    "[{m}(x=-1.5, y=None, z=(1, 2))]",
    "{m}()",
)


KINDS = (
    "ground_truth",
    "one_call_per_step",
    "mutate_value",
    "drop",
    "duplicate",
    "wrong_type",
    "extra_steps",
    "unknown_function",
    "empty_turn",
    "force_terminated",
    "odd_syntax",
)


def make_case(entry: MultiTurnEntry, kind: str, native: bool, seed: int) -> MultiTurnCase:
    rng = random.Random(f"{seed}:{entry.id}:{kind}:{native}")
    methods = sorted({doc["name"] for doc in entry.functions})
    expected = [[parse_call(c) for c in turn] for turn in entry.ground_truth]
    empty_turn = rng.randrange(len(expected)) if kind == "empty_turn" else -1
    turns: list[list[Any]] = []
    for index, calls in enumerate(expected):
        steps = [] if index == empty_turn else _per_turn(kind, calls, rng, methods)
        raw: list[Any] = [render_native(s) if native else render_text(s) for s in steps]
        chatter = rng.choice(["Done.", "I have completed the request.", "[]"])
        raw.append(chatter)  # the reply that ends the turn (not a call)
        turns.append(raw)
    if kind == "force_terminated":
        turns = turns[: rng.randrange(len(turns))]
    if kind == "odd_syntax":
        odd = rng.choice(ODD_TEXT).format(m=rng.choice(methods))
        step: Any = (
            odd if not native else [{rng.choice(methods): rng.choice(['{"x": 1}', "not json", "[1]"])}]
        )
        turns[rng.randrange(len(turns))].insert(0, step)
    return MultiTurnCase(kind, native, turns)


def generate_cases(
    entries: list[MultiTurnEntry], per_entry: int = 2, seed: int = 0
) -> Iterator[tuple[MultiTurnEntry, MultiTurnCase]]:
    """``per_entry`` cases per entry, kinds and styles rotating over the entries."""
    for number, entry in enumerate(entries):
        for j in range(per_entry):
            kind = KINDS[(number * per_entry + j) % len(KINDS)]
            native = (number + j) % 2 == 1
            yield entry, make_case(entry, kind, native, seed)
