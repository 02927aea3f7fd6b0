"""The BFCL AST checker: one verdict per entry, with the official error types.

A re-implementation of bfcl-eval 2026.3.23 (``eval_checker/ast_eval/ast_checker.py``
plus the relevance and decode steps of ``eval_runner.py``). Rules are applied
in the official order, because the order decides which ``error_type`` an
invalid output reports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_agenteval.tasks.bfcl._data import BfclDataError, BfclEntry
from pytest_agenteval.tasks.bfcl._decode import FAILED, WRONG_FORMAT, Call, DecodeError, is_call_list
from pytest_agenteval.tasks.bfcl._source_types import (
    JAVA_TYPES,
    JS_TYPES,
    UnsupportedTypeError,
    convert_java,
    convert_js,
)

PYTHON_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
_PYTHON_NESTED = ("array", "tuple")
_SOURCE_NESTED = ("Array", "ArrayList", "array")  # Java/JavaScript types with typed items


@dataclass(frozen=True)
class Verdict:
    """Valid or not; ``error_type`` is the official error type string when invalid."""

    valid: bool
    error_type: str | None = None
    errors: tuple[str, ...] = ()


VALID = Verdict(True)


def _fail(error_type: str, message: str) -> Verdict:
    return Verdict(False, error_type, (message,))


def is_empty_output(decoded: object) -> bool:
    """The official ``is_empty_output``: ``[]``, ``[{}]`` or not in the call format."""
    if not is_call_list(decoded):
        return True
    return len(decoded) == 0 or (len(decoded) == 1 and len(decoded[0]) == 0)


def contains_call(decoded: object, decode_error: object) -> bool:
    """Whether an output counts as a function call in relevance detection."""
    return decode_error is None and decoded is not None and not is_empty_output(decoded)


def check_entry(
    entry: BfclEntry,
    decoded: list[Call] | None,
    decode_error: str | DecodeError | None,
) -> Verdict:
    """Judge one decoded output as the official runner does.

    ``decode_error`` is the decoder's failure (a ``DecodeError`` keeps its
    official error type; a plain string means ``ast_decoder:decoder_failed``).
    """
    if "irrelevance" in entry.category:
        if contains_call(decoded, decode_error):
            return _fail("irrelevance_error:decoder_success", "decoded a call; none was expected")
        return VALID
    if "relevance" in entry.category:
        if contains_call(decoded, decode_error):
            return VALID
        reason = f": {decode_error}" if decode_error is not None else ""
        return _fail("relevance_error:decoder_failed", f"no call decoded{reason}")
    if decode_error is not None or decoded is None:
        error_type = decode_error.error_type if isinstance(decode_error, DecodeError) else FAILED
        return _fail(error_type, f"failed to decode: {decode_error}")
    if not is_call_list(decoded):
        return _fail(WRONG_FORMAT, "decoded output is not a list of {name: {params}}")
    if entry.ground_truth is None:
        raise BfclDataError(f"{entry.id} has no ground truth: check the possible_answer files")
    return check_calls(entry.functions, decoded, entry.ground_truth, entry.language, entry.category)


def check_calls(
    functions: Sequence[Mapping[str, Any]],
    calls: Sequence[Call],
    ground_truth: Sequence[Mapping[str, Any]],
    language: str,
    category: str,
) -> Verdict:
    """``ast_checker``: dispatch on a substring of the category name, as officially."""
    if "parallel" in category:
        return _check_parallel(functions, calls, ground_truth, language)
    if "multiple" in category:
        if len(calls) != len(ground_truth):
            return _fail("multiple_function_checker:wrong_count", "wrong number of calls")
        # Only the first expected call is checked, against its own function doc.
        doc = find_function(functions, _expected_name(ground_truth[0]))
        return check_call(doc, calls[0], ground_truth[0], language)
    if len(calls) != 1:
        return _fail("simple_function_checker:wrong_count", "expected exactly one call")
    # Official: simple categories use the first function doc whatever its name.
    return check_call(functions[0], calls[0], ground_truth[0], language)


def _check_parallel(
    functions: Sequence[Mapping[str, Any]],
    calls: Sequence[Call],
    ground_truth: Sequence[Mapping[str, Any]],
    language: str,
) -> Verdict:
    if len(calls) != len(ground_truth):
        return _fail("parallel_function_checker_no_order:wrong_count", "wrong number of calls")
    matched: set[int] = set()
    # Greedy, not bipartite: each expected call takes the first unmatched call that passes.
    for index, expected in enumerate(ground_truth):
        doc = find_function(functions, _expected_name(expected))
        match = next(
            (
                position
                for position, call in enumerate(calls)
                if position not in matched and check_call(doc, call, expected, language).valid
            ),
            None,
        )
        if match is None:
            return _fail(
                "parallel_function_checker_no_order:cannot_find_match",
                f"no call matches expected call {index}",
            )
        matched.add(match)
    return VALID


def _expected_name(expected: Mapping[str, Any]) -> str:
    return next(iter(expected))


def find_function(functions: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any]:
    for doc in functions:
        if doc["name"] == name:
            return doc
    raise BfclDataError(f"function {name!r} of the ground truth has no function doc")


def check_call(doc: Mapping[str, Any], call: Call, expected: Mapping[str, Any], language: str) -> Verdict:
    """``simple_function_checker``: one decoded call against one expected call."""
    options_by_param: Mapping[str, Any] = next(iter(expected.values()))
    name = doc["name"]
    if name not in call:
        return _fail("simple_function_checker:wrong_func_name", f"function {name!r} not called")
    params = call[name]
    schema = doc["parameters"]
    properties = schema.get("properties", {})
    for required in schema.get("required", []):
        # Checked before the optional rule: a required "" option is still required.
        if required not in params:
            return _fail("simple_function_checker:missing_required", f"missing {required!r}")
    for param, value in params.items():
        if param not in properties or param not in options_by_param:
            return _fail("simple_function_checker:unexpected_param", f"unexpected {param!r}")
        verdict = check_param(param, value, properties[param], options_by_param[param], language)
        if not verdict.valid:
            return verdict
    for param, options in options_by_param.items():
        if param not in params and "" not in options:
            return _fail("simple_function_checker:missing_optional", f"missing {param!r}")
    return VALID


def check_param(
    param: str, value: Any, schema: Mapping[str, Any], options: Sequence[Any], language: str
) -> Verdict:
    """Type and value of one parameter against its allowed values (``""`` = may be omitted)."""
    declared = schema["type"]
    try:
        value, expected, item_type = _typed_value(value, schema, language)
    except _TypeFailure as exc:
        return _fail(exc.error_type, f"{param!r}: {exc}")
    if declared == "tuple" and type(value) is tuple:
        value = list(value)  # JSON turns the ground truth's tuples into lists
    if language == "python" and declared == "float" and type(value) is int:
        value = float(value)  # the only numeric coercion
    valid, is_variable, error_type = _check_type(value, options, expected, item_type)
    if not valid:
        return _fail(error_type, f"{param!r}: wrong type {type(value).__name__}, {declared}")
    # A value with the ground truth's type instead of the declared one (a
    # "variable") skips the structured checks and is compared with `in`.
    if not is_variable:
        if expected is dict:
            return check_dict(value, options)
        if expected is list and item_type is dict:
            return check_list_of_dicts(value, options)
        if expected is str:
            return check_string(value, options)
        if expected is list:
            return check_list(value, options)
    if value not in options:
        return _fail("value_error:others", f"{param!r}: {value!r} not in {options!r}")
    return VALID


class _TypeFailure(Exception):
    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


def _typed_value(value: Any, schema: Mapping[str, Any], language: str) -> tuple[Any, type, Any]:
    """The value to type-check, its expected Python type, and the item type (or None)."""
    declared = schema["type"]
    if language == "python":
        item_name = schema["items"]["type"] if declared in _PYTHON_NESTED else None
        return value, _lookup(PYTHON_TYPES, declared), _lookup(PYTHON_TYPES, item_name)
    table, convert = (JAVA_TYPES, convert_java) if language == "java" else (JS_TYPES, convert_js)
    expected = _lookup(table, declared)
    if type(value) is not str:
        # Java/JavaScript values must be source text (a string) before conversion.
        short = "java" if language == "java" else "js"
        raise _TypeFailure(f"type_error:{short}", f"expected source text, got {value!r}")
    item_name = schema["items"]["type"] if declared in _SOURCE_NESTED else None
    item_type = _lookup(table, item_name)
    try:
        converted = convert(value, declared, item_name)
    except UnsupportedTypeError as exc:
        raise _TypeFailure("type_error:unsupported", str(exc)) from None
    return converted, expected, item_type


def _lookup(table: Mapping[str, type], name: str | None) -> Any:
    # The official checker crashes on a type it does not know; we fail the call.
    if name is None:
        return None
    if name not in table:
        raise _TypeFailure("type_error:unsupported", f"the checker does not know type {name!r}")
    return table[name]


def _option_type(options: Sequence[Any]) -> type | None:
    for option in options:
        if option != "":
            return type(option)
    return None


def _check_type(
    value: Any, options: Sequence[Any], expected: type, item_type: type | None
) -> tuple[bool, bool, str]:
    """``type_checker``: returns (valid, is_variable, error_type)."""
    option_type = _option_type(options)
    is_variable = option_type is not None and option_type is not expected
    if type(value) is expected:
        if item_type is None:
            return True, is_variable, ""
        # Items are checked one level deep against each list option; a non-list
        # option (a variable name, or "") lets any items through.
        for option in options:
            if type(option) is not list or all(
                _check_type(item, option, item_type, None)[0] for item in value
            ):
                return True, is_variable, ""
        nested = option_type is not None and type(value) is option_type
        return False, False, "type_error:nested" if nested else "type_error:simple"
    if option_type is not None and type(value) is option_type:
        return True, True, ""
    return False, False, "type_error:simple"


def standardize(text: str) -> str:
    """Drop spaces and ``,./-_*^``, lowercase, and turn ``'`` into ``"``."""
    return re.sub(r"[ \,\.\/\-\_\*\^]", "", text).lower().replace("'", '"')


def _standard(value: Any) -> Any:
    return standardize(value) if type(value) is str else value


def check_string(value: str, options: Sequence[Any]) -> Verdict:
    if standardize(value) in [standardize(o) for o in options if type(o) is str]:
        return VALID
    return _fail("value_error:string", f"{value!r} not in {options!r}")


def check_list(value: list[Any], options: Sequence[Any]) -> Verdict:
    """Order-sensitive; string items are standardized, other items compare with ``==``."""
    candidates = [[_standard(x) for x in o] for o in options if isinstance(o, (list, str))]
    if [_standard(x) for x in value] in candidates:
        return VALID
    return _fail("value_error:list/tuple", f"{value!r} not in {options!r}")


def check_dict(value: Any, options: Sequence[Any]) -> Verdict:
    """One level deep: known keys, allowed values, and every key without ``""`` present."""
    verdict = _fail("dict_checker:unclear", "no dict option")
    for option in options:
        if option == "":
            continue
        verdict = _check_dict_option(value, option)
        if verdict.valid:
            return verdict
    return verdict  # the last option's failure, as officially


def _check_dict_option(value: Any, option: Any) -> Verdict:
    if type(value) is not dict or type(option) is not dict:
        return _fail("value_error:dict_key", f"{value!r} is not like {option!r}")
    verdict = VALID
    for key, item in value.items():
        if key not in option:
            verdict = _fail("value_error:dict_key", f"unexpected key {key!r}")
            break
        if _standard(item) not in [_standard(o) for o in option[key]]:
            verdict = _fail("value_error:dict_value", f"{key!r}: {item!r} not allowed")
            break
    # Official: the missing-key scan runs even after a failure and wins the error type.
    for key, allowed in option.items():
        if key not in value and "" not in allowed:
            return _fail("value_error:dict_key", f"missing key {key!r}")
    return verdict


def check_list_of_dicts(value: list[Any], options: Sequence[Any]) -> Verdict:
    """Same length as an option, and each dict matches the option's dict at its position."""
    verdict = _fail("list_dict_checker:unclear", "no list option")
    for option in options:
        if not isinstance(option, (list, str)) or len(value) != len(option):
            verdict = _fail("value_error:list_dict_count", "wrong number of dicts")
            continue
        for item, expected in zip(value, option, strict=True):
            verdict = check_dict(item, [expected])
            if not verdict.valid:
                break
        else:
            return VALID
    return verdict


@dataclass(frozen=True)
class ParamScore:
    """Expected parameters of an entry and how many of them the output got right."""

    total: int
    correct: int


def parameter_score(entry: BfclEntry, decoded: Sequence[Call] | None) -> ParamScore:
    """Parameter-level credit for one output: our own metric, not an official one.

    ``total`` counts every parameter named in the ground truth, optional ones
    included, over all expected calls (0 for relevance and irrelevance entries).
    Each expected call, in ground-truth order, is paired with the first
    unpaired decoded call of the same function name. A parameter is correct
    when its paired call passes the official type and value check for it, or
    leaves it out while ``""`` is among its allowed values. Parameters of an
    unpaired expected call, and all parameters of an undecodable output, are
    wrong; parameters the output adds beyond the ground truth are not counted.
    """
    if entry.ground_truth is None:
        return ParamScore(0, 0)
    total = sum(len(next(iter(call.values()))) for call in entry.ground_truth)
    if decoded is None or not is_call_list(decoded):
        return ParamScore(total, 0)
    unpaired = list(decoded)
    correct = 0
    for expected in entry.ground_truth:
        name = _expected_name(expected)
        call = next((c for c in unpaired if name in c), None)
        if call is None:
            continue
        unpaired.remove(call)
        properties = find_function(entry.functions, name)["parameters"].get("properties", {})
        correct += sum(
            _param_correct(call[name], param, options, properties, entry.language)
            for param, options in expected[name].items()
        )
    return ParamScore(total, correct)


def _param_correct(
    params: Mapping[str, Any],
    param: str,
    options: Sequence[Any],
    properties: Mapping[str, Any],
    language: str,
) -> bool:
    if param not in params:
        return "" in options
    if param not in properties:
        return False
    return check_param(param, params[param], properties[param], options, language).valid
