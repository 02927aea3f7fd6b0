"""Rendering and mutating model outputs for the BFCL parity cases.

Oracle values are drawn from the ground truth's allowed values; mutations
then break (or harmlessly respell) one aspect of an output at a time.
"""

from __future__ import annotations

import copy
import json
import random
import re
import zlib
from collections.abc import Callable
from typing import Any

from pytest_agenteval.tasks.bfcl import BfclEntry

SEED = 20260323

CallSpec = tuple[str, list[tuple[str, str]]]  # name, [(param, value source text)]
ValueCall = tuple[str, dict[str, Any]]  # name, {param: Python value}
Mutation = Callable[[BfclEntry, list[Any], random.Random], Any]


# ---------------------------------------------------------------- rendering


def render_py(value: Any, rng: random.Random) -> str:
    """Python source for a value, with varied string quoting."""
    if isinstance(value, str):
        return json.dumps(value) if rng.random() < 0.5 else repr(value)
    if isinstance(value, tuple):
        inner = ", ".join(render_py(v, rng) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(render_py(v, rng) for v in value) + "]"
    if isinstance(value, dict):
        items = (f"{render_py(k, rng)}: {render_py(v, rng)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    return repr(value)


def render_calls(calls: list[CallSpec], separator: str = ", ", brackets: bool = True) -> str:
    body = separator.join(
        f"{name}({', '.join(f'{param}={value}' for param, value in args)})" for name, args in calls
    )
    return f"[{body}]" if brackets else body


_JAVA_ELEMENT = {"integer": "int", "long": "long", "String": "String", "char": "char"}


def render_java(value: Any, schema: dict[str, Any], rng: random.Random) -> str:
    """Java source text for a value of a declared Java type."""
    declared = schema.get("type")
    if isinstance(value, bool):
        return "true" if value else "false"
    if declared == "long" and isinstance(value, int):
        return f"{value}L" if rng.random() < 0.8 else str(value)
    if declared == "float" and isinstance(value, (int, float)):
        return f"{float(value)}f"
    if declared in ("Array", "ArrayList") and isinstance(value, list):
        item = schema.get("items", {})
        parts = [render_java(v, item, rng) if not isinstance(v, str) else json.dumps(v) for v in value]
        if declared == "Array":
            element = _JAVA_ELEMENT.get(item.get("type"), "Object")
            return f"new {element}[]{{{', '.join(parts)}}}"
        return f"new ArrayList<>(Arrays.asList({', '.join(parts)}))"
    if declared == "HashMap" and isinstance(value, dict):
        puts = " ".join(f'put("{k}", {json.dumps(_first(v))});' for k, v in value.items())
        return f"new HashMap<String, String>() {{{{ {puts} }}}}"
    if isinstance(value, str):
        bare = re.fullmatch(r"[A-Za-z_][\w.]*", value) and rng.random() < 0.5
        return value if bare else json.dumps(value)
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def render_js(value: Any, schema: dict[str, Any], rng: random.Random) -> str:
    """JavaScript source text for a value of a declared JavaScript type."""
    declared = schema.get("type")
    if isinstance(value, bool):
        return "true" if value else "false"
    if declared == "Bigint" and isinstance(value, int):
        return f"{value}n"
    if isinstance(value, str):
        bare = declared == "any" and re.fullmatch(r"[A-Za-z_$][\w$.]*", value)
        if bare and rng.random() < 0.6:
            return value
        return json.dumps(value) if rng.random() < 0.6 else "'" + value.replace("'", "\\'") + "'"
    if isinstance(value, list):
        inner = ", ".join(render_js(v, schema.get("items", {}), rng) for v in value)
        return f"new Array({inner})" if rng.random() < 0.2 else f"[{inner}]"
    if isinstance(value, dict):
        items = ", ".join(f"{k}: {render_js(_first(v), {}, rng)}" for k, v in value.items())
        return "{" + items + "}"
    return json.dumps(value)


def _first(options: Any) -> Any:
    if isinstance(options, list):
        non_empty = [o for o in options if o != ""]
        return non_empty[0] if non_empty else ""
    return options


# ---------------------------------------------------------------- oracle values


def _equivalent_string(text: str, rng: random.Random) -> str:
    """A spelling the official string normalisation treats as equal."""
    choice = rng.randrange(5)
    if choice == 0:
        return text.upper()
    if choice == 1 and " " in text:
        return text.replace(" ", "-", 1)
    if choice == 2:
        return f" {text}."
    if choice == 3:
        return text.replace(",", "")
    return text


def oracle_value(options: list[Any], schema: dict[str, Any], rng: random.Random) -> Any:
    """A value the ground truth allows, in a randomly chosen allowed spelling."""
    non_empty = [o for o in options if o != ""]
    if not non_empty:
        return ""
    value = copy.deepcopy(rng.choice(non_empty))
    declared = schema.get("type")
    if isinstance(value, dict):
        return _oracle_dict(value, rng)
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [_oracle_dict(v, rng) for v in value]
    if declared == "float" and isinstance(value, float) and value.is_integer() and rng.random() < 0.5:
        return int(value)  # int for float is accepted
    if declared == "tuple" and isinstance(value, list) and rng.random() < 0.5:
        return tuple(value)
    if isinstance(value, str) and rng.random() < 0.3:
        return _equivalent_string(value, rng)
    return value


def _oracle_dict(option: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    result = {}
    for key, allowed in option.items():
        allowed = allowed if isinstance(allowed, list) else [allowed]
        if "" in allowed and rng.random() < 0.4:
            continue
        result[key] = oracle_value(allowed, {}, rng)
    return result


def oracle_params(expected: dict[str, list[Any]], doc: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    required = set(doc["parameters"].get("required", []))
    properties = doc["parameters"].get("properties", {})
    params = {}
    for param, options in expected.items():
        if "" in options and param not in required and rng.random() < 0.5:
            continue  # "" among the options: the parameter may be omitted
        params[param] = oracle_value(options, properties.get(param, {}), rng)
    if rng.random() < 0.3:
        items = list(params.items())
        rng.shuffle(items)
        params = dict(items)
    return params


def find_doc(entry: BfclEntry, name: str) -> dict[str, Any]:
    return next((f for f in entry.functions if f["name"] == name), entry.functions[0])


def case_rng(entry_id: str) -> random.Random:
    """One random stream per entry: cases do not depend on which entries are loaded."""
    return random.Random(zlib.crc32(f"{SEED}:{entry_id}".encode()))


# ---------------------------------------------------------------- python outputs


class Raw(str):
    """Source text inserted verbatim into a rendered call."""


def render_value_calls(calls: list[ValueCall], rng: random.Random, **layout: Any) -> str:
    specs = [
        (name, [(p, v if isinstance(v, Raw) else render_py(v, rng)) for p, v in params.items()])
        for name, params in calls
    ]
    return render_calls(specs, **layout)


def as_json(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [as_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): as_json(v) for k, v in value.items()}
    return str(value) if isinstance(value, Raw) else value


def _wrong_type(value: Any, rng: random.Random) -> Any:
    """The same information with another Python type."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return rng.choice([str(value), float(value), value != 0])
    if isinstance(value, float):
        return rng.choice([str(value), round(value)])
    if isinstance(value, str):
        return rng.choice([len(value), [value], None])
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, list):
        return tuple(value) if rng.random() < 0.5 else [str(v) for v in value]
    if isinstance(value, dict):
        return json.dumps(as_json(value))
    return "null"


def _wrong_value(value: Any, rng: random.Random) -> Any:
    """A close but different value (some string edits normalise away, some do not)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + rng.choice([1, -1, 10])
    if isinstance(value, str):
        return rng.choice([value + "!", value + "x", _equivalent_string(value, rng), ""])
    if isinstance(value, (list, tuple)):
        items = list(value)
        return type(value)(items[::-1] if len(items) > 1 and rng.random() < 0.6 else items[1:])
    if isinstance(value, dict):
        changed = dict(value)
        if changed and rng.random() < 0.5:
            changed.pop(rng.choice(list(changed)))
        else:
            changed["unexpected_key"] = "x"
        return changed
    return value


_RAW_VALUES = [
    "some_variable",
    "2 + 3",
    "10 * 2",
    "-7",
    "+5",
    "~3",
    "not_defined + 1",
    "'ab' * 2",
    "compute(x=1)",
    "compute(1)",
    "values[0]",
    "lambda x: x",
    "np.pi",
    "f'{x}'",
    "{1, 2}",
    "x if y else z",
    "[i for i in range(3)]",
    "...",
    "b'raw'",
    "None",
    "-'text'",
    "1 / 0",
    "(1, 2)",
    "{'k': [1, 2]}",
    "2 ** 3",
    "[1, 2] + [3]",
    "-3.5",
    "True + 1",
]


def _pick_param(calls: list[ValueCall], rng: random.Random) -> tuple[int, str] | None:
    options = [(i, p) for i, (_, params) in enumerate(calls) for p in params]
    return rng.choice(options) if options else None


def _edit_param(calls: list[ValueCall], rng: random.Random, edit: Callable[[Any], Any]) -> Any:
    picked = _pick_param(calls, rng)
    if picked is None:
        return None
    index, param = picked
    calls = copy.deepcopy(calls)
    calls[index][1][param] = edit(calls[index][1][param])
    return calls


def _wrong_name(entry: BfclEntry, calls: list[ValueCall], rng: random.Random) -> Any:
    index = rng.randrange(len(calls))
    name, params = calls[index]
    others = [f["name"] for f in entry.functions if f["name"] != name]
    variants = [name + "_v2", name.split(".")[-1], name.replace(".", "_"), name.upper()]
    calls = list(calls)
    calls[index] = (rng.choice(others + variants), params)
    return calls


def _drop_param(entry: BfclEntry, calls: list[ValueCall], rng: random.Random) -> Any:
    picked = _pick_param(calls, rng)
    if picked is None:
        return None
    calls = copy.deepcopy(calls)
    calls[picked[0]][1].pop(picked[1])
    return calls


def _extra_param(entry: BfclEntry, calls: list[ValueCall], rng: random.Random) -> Any:
    index = rng.randrange(len(calls))
    name, params = calls[index]
    known = find_doc(entry, name)["parameters"].get("properties", {})
    unused = [p for p in known if p not in params]
    calls = copy.deepcopy(calls)
    extra = rng.choice(unused) if unused and rng.random() < 0.6 else "unexpected_flag"
    calls[index][1][extra] = rng.choice([True, 1, "x", ""])
    return calls


def _optional_given_empty(entry: BfclEntry, calls: list[ValueCall], rng: random.Random) -> Any:
    expected = entry.ground_truth or []
    omitted = [
        (i, p)
        for i, (name, params) in enumerate(calls)
        for gt in expected
        if name in gt
        for p, options in gt[name].items()
        if "" in options and p not in params
    ]
    if not omitted:
        return None
    index, param = rng.choice(omitted)
    calls = copy.deepcopy(calls)
    calls[index][1][param] = ""
    return calls


def _positional(entry: BfclEntry, calls: list[ValueCall], rng: random.Random) -> str:
    return (
        "["
        + ", ".join(
            f"{name}({', '.join(render_py(v, rng) for v in params.values())})" for name, params in calls
        )
        + "]"
    )


def _json_output(entry: BfclEntry, calls: list[ValueCall], rng: random.Random) -> str:
    key = rng.choice(["arguments", "parameters"])
    data = [{"name": name, key: as_json(params)} for name, params in calls]
    text = json.dumps(data if len(data) > 1 or rng.random() < 0.5 else data[0])
    return f"```json\n{text}\n```" if rng.random() < 0.3 else text


def _swap_between_calls(entry: BfclEntry, calls: list[ValueCall], rng: random.Random) -> Any:
    if len(calls) < 2:
        return None
    first, second = rng.sample(range(len(calls)), 2)
    shared = sorted(set(calls[first][1]) & set(calls[second][1]))
    if not shared:
        return None
    param = rng.choice(shared)
    calls = copy.deepcopy(calls)
    calls[first][1][param], calls[second][1][param] = (
        calls[second][1][param],
        calls[first][1][param],
    )
    return calls


def shuffled(calls: list[ValueCall], rng: random.Random) -> list[ValueCall]:
    calls = list(calls)
    rng.shuffle(calls)
    return calls


def _edit_dict(value: dict[str, Any], rng: random.Random) -> Any:
    edited = dict(value)
    choice = rng.randrange(4)
    if choice == 0 and edited:
        edited.pop(rng.choice(list(edited)))
    elif choice == 1:
        edited["extra_key"] = rng.choice([1, "x", True])
    elif choice == 2 and edited:
        key = rng.choice(list(edited))
        edited[key] = _wrong_value(edited[key], rng)
    else:
        return {}
    return edited


def typed_edit_value(value: Any, declared: str | None, rng: random.Random) -> Any:
    """An edit aimed at the checker's rule for the declared type."""
    if isinstance(value, dict):
        return _edit_dict(value, rng)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, dict) for v in value):
        items = [dict(v) for v in value]
        choice = rng.randrange(4)
        if choice == 0:
            return items[1:]
        if choice == 1:
            return [*items, dict(items[0])]
        index = rng.randrange(len(items))
        items[index] = _edit_dict(items[index], rng) if choice == 2 else str(items[index])
        return items
    if isinstance(value, (list, tuple)):
        convert = rng.choice([float, int, str, lambda v: [v], lambda v: v])
        try:
            items = [convert(v) for v in value]
        except (TypeError, ValueError):
            items = list(value)
        return tuple(items) if rng.random() < 0.3 else items
    if declared == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return rng.choice([int(value), float(value), str(value), value > 0])
    if declared == "integer" and isinstance(value, int):
        return rng.choice([True, float(value), str(value), value])
    if declared == "boolean":
        return rng.choice([1, 0, "true", str(value)])
    return rng.choice([Raw("name_var"), 42, ""])


def _typed_edit(entry: BfclEntry, calls: list[ValueCall], rng: random.Random) -> Any:
    picked = _pick_param(calls, rng)
    if picked is None:
        return None
    index, param = picked
    name, params = calls[index]
    schema = find_doc(entry, name)["parameters"].get("properties", {}).get(param, {})
    calls = copy.deepcopy(calls)
    calls[index][1][param] = typed_edit_value(params[param], schema.get("type"), rng)
    return calls


# A mutation returns new calls (rendered later), output text, or None (not applicable).
PY_MUTATIONS: dict[str, Mutation] = {
    "wrong_name": _wrong_name,
    "drop_param": _drop_param,
    "extra_param": _extra_param,
    "optional_given_empty": _optional_given_empty,
    "positional": _positional,
    "json": _json_output,
    "swap_between_calls": _swap_between_calls,
    "typed_edit": _typed_edit,
    "typed_edit_2": _typed_edit,
    "wrong_type": lambda e, c, r: _edit_param(c, r, lambda v: _wrong_type(v, r)),
    "wrong_value": lambda e, c, r: _edit_param(c, r, lambda v: _wrong_value(v, r)),
    "raw_value": lambda e, c, r: _edit_param(c, r, lambda v: Raw(r.choice(_RAW_VALUES))),
    "shuffled_calls": lambda e, c, r: shuffled(c, r),
    "duplicated_call": lambda e, c, r: [*c, r.choice(c)],
    "dropped_call": lambda e, c, r: c[1:],
    "extra_call": lambda e, c, r: [*c, (e.functions[-1]["name"], {})],
}
TEXT_MUTATIONS: dict[str, Callable[[str, random.Random], str]] = {
    "no_brackets": lambda t, r: t[1:-1],
    "fenced_plain": lambda t, r: f"```\n{t}\n```",
    "fenced_python": lambda t, r: f"```python\n{t}\n```",
    "prose_prefix": lambda t, r: f"Sure, here is the call: {t}",
    "prose_suffix": lambda t, r: f"{t}\nLet me know if you need anything else.",
    "quoted": lambda t, r: f"'{t}'",
    "newlines": lambda t, r: f"\n\n  {t}  \n",
    "think": lambda t, r: f"<think>The user wants a call.</think>\n{t}",
    "truncated": lambda t, r: t[: max(1, len(t) // 2)],
    "missing_paren": lambda t, r: t.replace(")", "", 1),
    "split_lines": lambda t, r: t.replace("), ", ")\n"),
    "empty": lambda t, r: "",
    "empty_list": lambda t, r: "[]",
    "refusal": lambda t, r: "I cannot help with that using the given functions.",
}


# ---------------------------------------------------------------- java / javascript outputs

_SOURCE_LITERALS = [
    "true",
    "false",
    "1",
    "-2",
    "1.5",
    "3L",
    "2.0f",
    '"text"',
    "'text'",
    "null",
    "x.y()",
    "new int[]{1, 2}",
    'new ArrayList<>(Arrays.asList("a"))',
    "[1, 2]",
    "{a: 1}",
    "5n",
    "new HashMap<>()",
    '"café"',
    "someVariable",
    "a + b",
    "`tpl`",
]


def source_oracle(entry: BfclEntry, rng: random.Random) -> list[CallSpec]:
    render = render_java if entry.language == "java" else render_js
    specs = []
    for expected in entry.ground_truth or []:
        for name, options in expected.items():
            doc = find_doc(entry, name)
            properties = doc["parameters"].get("properties", {})
            params = oracle_params(options, doc, rng)
            specs.append((name, [(p, render(v, properties.get(p, {}), rng)) for p, v in params.items()]))
    return specs


def _edit_source(calls: list[CallSpec], rng: random.Random, edit: Callable[[str], str]) -> Any:
    options = [(i, j) for i, (_, args) in enumerate(calls) for j in range(len(args))]
    if not options:
        return None
    i, j = rng.choice(options)
    calls = copy.deepcopy(calls)
    param, value = calls[i][1][j]
    calls[i][1][j] = (param, edit(value))
    return calls


def _toggle_quotes(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return json.dumps(value)


SOURCE_MUTATIONS: dict[str, Mutation] = {
    "wrong_name": lambda e, c, r: [(c[0][0] + "X", c[0][1]), *c[1:]],
    "drop_param": lambda e, c, r: [(c[0][0], c[0][1][1:]), *c[1:]] if c[0][1] else None,
    "extra_param": lambda e, c, r: [(c[0][0], [*c[0][1], ("extraParam", "1")]), *c[1:]],
    "duplicate_param": lambda e, c, r: [(c[0][0], c[0][1] + c[0][1][:1]), *c[1:]],
    "positional": lambda e, c, r: [(c[0][0], [("", v) for _, v in c[0][1]])],
    "toggle_quotes": lambda e, c, r: _edit_source(c, r, _toggle_quotes),
    "wrong_literal": lambda e, c, r: _edit_source(c, r, lambda v: r.choice(_SOURCE_LITERALS)),
    "non_ascii": lambda e, c, r: _edit_source(c, r, lambda v: f'"é{v.strip(chr(34))}"'),
    "two_calls": lambda e, c, r: [*c, *c],
    "zero_args": lambda e, c, r: [(c[0][0], [])],
}


def render_source_calls(calls: list[CallSpec], **layout: Any) -> str:
    # A positional argument has an empty parameter name.
    specs = [(name, [(p, v) for p, v in args]) for name, args in calls]
    text = render_calls(specs, **layout)
    return re.sub(r"([(,] ?)=", r"\1", text)
