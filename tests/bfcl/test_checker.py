"""The AST checker, one official rule per table row."""

from __future__ import annotations

import importlib.util

import pytest

from pytest_agenteval.tasks.bfcl import (
    BfclEntry,
    DecodeError,
    ParamScore,
    Verdict,
    check_entry,
    decode_strict,
    parameter_score,
)

# Java and JavaScript decoding parses with tree-sitter (the 'bfcl' extra).
needs_tree_sitter = pytest.mark.skipif(
    importlib.util.find_spec("tree_sitter_java") is None
    or importlib.util.find_spec("tree_sitter_javascript") is None,
    reason="pip install tree-sitter==0.21.3 tree-sitter-java==0.21.0 tree-sitter-javascript==0.21.4",
)


def _doc(name, properties, required=()):
    return {
        "name": name,
        "description": "test function",
        "parameters": {"type": "dict", "properties": properties, "required": list(required)},
    }


def _entry(category, functions, ground_truth, language="python"):
    return BfclEntry("t_0", category, [[{"role": "user", "content": "q"}]], functions, ground_truth, language)


def _judge(entry, text):
    try:
        decoded, error = decode_strict(text, entry.language), None
    except DecodeError as exc:
        decoded, error = None, exc
    verdict = check_entry(entry, decoded, error)
    return verdict.valid, verdict.error_type


HYPOT = _entry(
    "simple_python",
    [
        _doc(
            "math.hypot",
            {
                "x": {"type": "integer"},
                "y": {"type": "float"},
                "unit": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            required=["x", "y"],
        )
    ],
    [{"math.hypot": {"x": [3], "y": [4.0], "unit": ["cm", ""], "tags": [["a-b"], ""]}}],
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[math.hypot(x=3, y=4)]", (True, None)),  # int for float, optionals omitted
        ("math.hypot(x=3, y=4.0, unit='CM', tags=['a-B'])", (True, None)),
        ("[math.hypot(x=3, y=4, unit='')]", (True, None)),  # "" is an allowed value
        ("[math.hypot(y=4.0, x=3)]", (True, None)),
        ("[math.hypot(x=3.0, y=4)]", (False, "type_error:simple")),  # float for int
        ("[math.hypot(x=True, y=4)]", (False, "type_error:simple")),  # bool is not int
        ("[math.hypot(x='3', y=4)]", (False, "type_error:simple")),
        ("[math.hypot(x=3, y=5)]", (False, "value_error:others")),
        ("[math.hypot(x=3, y=4, unit='mm')]", (False, "value_error:string")),
        ("[math.hypot(x=3, y=4, tags=['b-a'])]", (False, "value_error:list/tuple")),
        ("[math.hypot(x=3, y=4, tags='a-b')]", (False, "type_error:simple")),
        ("[math.hypot(x=3)]", (False, "simple_function_checker:missing_required")),
        ("[math.hypot(3, 4)]", (False, "simple_function_checker:missing_required")),
        ("[math.hypot(x=3, y=4, z=1)]", (False, "simple_function_checker:unexpected_param")),
        ("[hypot(x=3, y=4)]", (False, "simple_function_checker:wrong_func_name")),
        ("[math_hypot(x=3, y=4)]", (False, "simple_function_checker:wrong_func_name")),
        (
            "[math.hypot(x=3, y=4), math.hypot(x=3, y=4)]",
            (False, "simple_function_checker:wrong_count"),
        ),
        ("", (False, "simple_function_checker:wrong_count")),
        ("Sure: [math.hypot(x=3, y=4)]", (False, "ast_decoder:decoder_failed")),
        ("```python\n[math.hypot(x=3, y=4)]\n```", (False, "ast_decoder:decoder_failed")),
    ],
)
def test_simple_rules(text, expected):
    assert _judge(HYPOT, text) == expected


WEATHER_DOC = _doc(
    "get_weather", {"city": {"type": "string"}, "days": {"type": "integer"}}, required=["city"]
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[get_weather(city='New York')]", (True, None)),
        ('[get_weather(city="new-york")]', (True, None)),  # spaces and ,./-_*^ are dropped
        ("[get_weather(city='NEW_YORK.')]", (True, None)),
        ("[get_weather(city='nyc', days=3)]", (True, None)),
        (
            "[get_weather(city='New York!')]",
            (False, "value_error:string"),
        ),  # other punctuation counts
        ("[get_weather(city='Newark')]", (False, "value_error:string")),
        ("[get_weather(city='NYC', days='')]", (False, "type_error:simple")),
        ("[get_weather(city='NYC', days=3.0)]", (False, "type_error:simple")),
        ("[get_weather(city=NYC)]", (True, None)),  # a bare name becomes its string
    ],
)
def test_string_normalisation_and_optional_values(text, expected):
    entry = _entry(
        "simple_python",
        [WEATHER_DOC],
        [{"get_weather": {"city": ["New York", "NYC"], "days": [3, ""]}}],
    )
    assert _judge(entry, text) == expected


def test_a_required_parameter_stays_required_even_with_an_empty_option():
    doc = _doc("get_weather", WEATHER_DOC["parameters"]["properties"], required=["city", "days"])
    entry = _entry("simple_python", [doc], [{"get_weather": {"city": ["NYC"], "days": [3, ""]}}])
    assert _judge(entry, "[get_weather(city='NYC')]") == (
        False,
        "simple_function_checker:missing_required",
    )


def test_an_omitted_parameter_needs_an_empty_option():
    entry = _entry("simple_python", [WEATHER_DOC], [{"get_weather": {"city": ["NYC"], "days": [3]}}])
    assert _judge(entry, "[get_weather(city='NYC')]") == (
        False,
        "simple_function_checker:missing_optional",
    )


def test_a_documented_parameter_absent_from_the_ground_truth_is_unexpected():
    entry = _entry("simple_python", [WEATHER_DOC], [{"get_weather": {"city": ["NYC"]}}])
    assert _judge(entry, "[get_weather(city='NYC', days=3)]") == (
        False,
        "simple_function_checker:unexpected_param",
    )


def _single(properties, options, language="python"):
    return _entry(
        {"python": "simple_python", "java": "simple_java", "javascript": "simple_javascript"}[language],
        [_doc("f", properties)],
        [{"f": options}],
        language,
    )


@pytest.mark.parametrize(
    ("properties", "options", "text", "expected"),
    [
        # tuple -> list is the only container coercion
        (
            {"p": {"type": "tuple", "items": {"type": "float"}}},
            {"p": [[1.0, 2.0]]},
            "f(p=(1.0, 2.0))",
            (True, None),
        ),
        (
            {"p": {"type": "tuple", "items": {"type": "float"}}},
            {"p": [[1.0, 2.0]]},
            "f(p=[1.0, 2.0])",
            (True, None),
        ),
        (
            {"p": {"type": "array", "items": {"type": "float"}}},
            {"p": [[1.0, 2.0]]},
            "f(p=(1.0, 2.0))",
            (False, "type_error:simple"),
        ),
        # items are typed one level deep; ints are not floats inside lists
        (
            {"p": {"type": "array", "items": {"type": "float"}}},
            {"p": [[1.0, 2.0]]},
            "f(p=[1, 2])",
            (False, "type_error:nested"),
        ),
        # ...unless the ground truth itself holds ints (its type wins)
        (
            {"p": {"type": "array", "items": {"type": "float"}}},
            {"p": [[1, 2]]},
            "f(p=[1, 2])",
            (True, None),
        ),
        (
            {"p": {"type": "array", "items": {"type": "string"}}},
            {"p": [["a", "b"]]},
            "f(p=['b', 'a'])",
            (False, "value_error:list/tuple"),
        ),
        (
            {"p": {"type": "array", "items": {"type": "string"}}},
            {"p": [["New York"]]},
            "f(p=['new york'])",
            (True, None),
        ),
        (
            {"p": {"type": "array", "items": {"type": "integer"}}},
            {"p": [[1, 2], ""]},
            "f(p=[])",
            (True, None),
        ),
        # dicts: one level, known keys, allowed values, required keys
        (
            {"p": {"type": "dict"}},
            {"p": [{"a": [1], "b": ["x", ""]}]},
            "f(p={'a': 1})",
            (True, None),
        ),
        (
            {"p": {"type": "dict"}},
            {"p": [{"a": [1], "b": ["x", ""]}]},
            "f(p={'a': 1, 'b': 'X'})",
            (True, None),
        ),
        (
            {"p": {"type": "dict"}},
            {"p": [{"a": [1], "b": ["x", ""]}]},
            "f(p={'a': True})",
            (True, None),
        ),
        (
            {"p": {"type": "dict"}},
            {"p": [{"a": [1], "b": ["x", ""]}]},
            "f(p={'b': 'x'})",
            (False, "value_error:dict_key"),
        ),
        (
            {"p": {"type": "dict"}},
            {"p": [{"a": [1], "b": ["x", ""]}]},
            "f(p={'a': 2})",
            (False, "value_error:dict_value"),
        ),
        (
            {"p": {"type": "dict"}},
            {"p": [{"a": [1], "b": ["x", ""]}]},
            "f(p={'a': 1, 'c': 1})",
            (False, "value_error:dict_key"),
        ),
        (
            {"p": {"type": "dict"}},
            {"p": [{"a": [1], "b": ["x", ""]}]},
            "f(p='a')",
            (False, "type_error:simple"),
        ),
        ({"p": {"type": "dict"}}, {"p": [""]}, "f(p={})", (False, "dict_checker:unclear")),
        # lists of dicts: same length, position by position
        (
            {"p": {"type": "array", "items": {"type": "dict"}}},
            {"p": [[{"k": ["a"]}, {"k": ["b"]}]]},
            "f(p=[{'k': 'a'}, {'k': 'b'}])",
            (True, None),
        ),
        (
            {"p": {"type": "array", "items": {"type": "dict"}}},
            {"p": [[{"k": ["a"]}, {"k": ["b"]}]]},
            "f(p=[{'k': 'b'}, {'k': 'a'}])",
            (False, "value_error:dict_value"),
        ),
        (
            {"p": {"type": "array", "items": {"type": "dict"}}},
            {"p": [[{"k": ["a"]}, {"k": ["b"]}]]},
            "f(p=[{'k': 'a'}])",
            (False, "value_error:list_dict_count"),
        ),
        (
            {"p": {"type": "array", "items": {"type": "dict"}}},
            {"p": [[{"k": ["a"]}], ""]},
            "f(p=[])",
            (True, None),
        ),
        # a "variable": the ground truth's type differs from the declared one
        ({"p": {"type": "integer"}}, {"p": ["num"]}, "f(p=num)", (True, None)),
        ({"p": {"type": "integer"}}, {"p": ["num"]}, "f(p=5)", (False, "value_error:others")),
        ({"p": {"type": "float"}}, {"p": [5]}, "f(p=5)", (True, None)),
        ({"p": {"type": "boolean"}}, {"p": [True]}, "f(p=1)", (False, "type_error:simple")),
        ({"p": {"type": "any"}}, {"p": ["x"]}, "f(p='X')", (True, None)),
    ],
)
def test_python_type_and_value_rules(properties, options, text, expected):
    assert _judge(_single(properties, options), text) == expected


MULTIPLE = _entry(
    "multiple",
    [_doc("f", {"a": {"type": "integer"}}, ["a"]), _doc("g", {"a": {"type": "integer"}}, ["a"])],
    [{"g": {"a": [1]}}],
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[g(a=1)]", (True, None)),
        ("[f(a=1)]", (False, "simple_function_checker:wrong_func_name")),
        ("[g(a=1), f(a=1)]", (False, "multiple_function_checker:wrong_count")),
    ],
)
def test_multiple_needs_the_one_expected_call(text, expected):
    assert _judge(MULTIPLE, text) == expected


PARALLEL = _entry(
    "parallel",
    [_doc("f", {"a": {"type": "integer"}}, ["a"])],
    [{"f": {"a": [1, 2]}}, {"f": {"a": [1]}}],
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[f(a=2), f(a=1)]", (True, None)),
        # Greedy matching: the first expected call takes f(a=1), leaving nothing for the second.
        ("[f(a=1), f(a=2)]", (False, "parallel_function_checker_no_order:cannot_find_match")),
        ("[f(a=1)]", (False, "parallel_function_checker_no_order:wrong_count")),
        ("[f(a=2), f(a=1), f(a=1)]", (False, "parallel_function_checker_no_order:wrong_count")),
    ],
)
def test_parallel_matches_greedily_in_ground_truth_order(text, expected):
    assert _judge(PARALLEL, text) == expected


@pytest.mark.parametrize(
    ("category", "text", "expected"),
    [
        ("irrelevance", "I cannot help with that.", (True, None)),
        ("irrelevance", "[]", (True, None)),
        ("irrelevance", "", (True, None)),
        ("irrelevance", "f(a=1) because you asked", (True, None)),
        ("irrelevance", "[f(a=1)]", (False, "irrelevance_error:decoder_success")),
        ("live_irrelevance", "[f()]", (False, "irrelevance_error:decoder_success")),
        ("live_relevance", "[f(a='anything')]", (True, None)),  # arguments are not checked
        ("live_relevance", "[]", (False, "relevance_error:decoder_failed")),
        ("live_relevance", "no call needed", (False, "relevance_error:decoder_failed")),
    ],
)
def test_relevance_rules(category, text, expected):
    entry = _entry(category, [_doc("f", {"a": {"type": "integer"}}, ["a"])], None)
    assert _judge(entry, text) == expected


def test_relevance_counts_an_empty_native_call_as_no_call():
    entry = _entry("irrelevance", [_doc("f", {})], None)
    assert check_entry(entry, [{}], None) == Verdict(True)


JAVA_PROPERTIES = {
    "flag": {"type": "boolean"},
    "n": {"type": "long"},
    "s": {"type": "String"},
    "arr": {"type": "Array", "items": {"type": "String"}},
    "lst": {"type": "ArrayList", "items": {"type": "String"}},
    "m": {"type": "HashMap"},
    "x": {"type": "float"},
}


@needs_tree_sitter
@pytest.mark.parametrize(
    ("options", "text", "expected"),
    [
        (
            {"flag": [True], "n": [120], "s": ["abc"]},
            '[C.m(flag=true, n=120L, s="abc")]',
            (True, None),
        ),
        (
            {"flag": [True], "n": [120], "s": ["abc"]},
            "[C.m(flag=true, n=120L, s=abc)]",
            (True, None),
        ),
        (
            {"flag": [True], "n": [120], "s": ["abc"]},
            '[C.m(flag=true, n=120, s="abc")]',
            (False, "type_error:simple"),
        ),
        (
            {"flag": [True], "n": [120], "s": ["abc"]},
            '[C.m(flag=1, n=120L, s="abc")]',
            (False, "type_error:simple"),
        ),
        ({"x": [1.5], "s": ["abc"]}, '[C.m(x=1.5f, s="abc")]', (True, None)),
        ({"x": [1.5], "s": ["abc"]}, '[C.m(x=1.5, s="abc")]', (False, "type_error:simple")),
        (
            {"lst": [["a", "b"]]},
            '[C.m(lst=new ArrayList<>(Arrays.asList("a", "b")))]',
            (True, None),
        ),
        # Official quirks: Array elements keep their quotes; HashMap bodies are dropped.
        (
            {"arr": [["a", "b"]]},
            '[C.m(arr=new String[]{"a", "b"})]',
            (False, "value_error:list/tuple"),
        ),
        (
            {"m": [{"k": ["v"]}]},
            '[C.m(m=new HashMap<String, String>() {{ put("k", "v"); }})]',
            (False, "value_error:dict_key"),
        ),
        (
            {"s": ["abc"]},
            '[C.m(s="abc", t=1)]',
            (False, "simple_function_checker:unexpected_param"),
        ),
        ({"s": ["abc"]}, "C.m()", (False, "ast_decoder:decoder_failed")),
        # tree-sitter's error recovery: a short call without `;` becomes an ERROR node
        ({"x": [1.5]}, "[C.m(x=1.5)]", (False, "ast_decoder:decoder_failed")),
        ({"s": ["abc"]}, "hello world", (False, "ast_decoder:decoder_wrong_output_format")),
    ],
)
def test_java_values_are_converted_by_their_declared_type(options, text, expected):
    entry = _entry("simple_java", [_doc("C.m", JAVA_PROPERTIES)], [{"C.m": options}], "java")
    assert _judge(entry, text) == expected


JS_PROPERTIES = {
    "s": {"type": "String"},
    "b": {"type": "Boolean"},
    "arr": {"type": "array", "items": {"type": "String"}},
    "d": {"type": "dict"},
    "x": {"type": "float"},
    "big": {"type": "Bigint"},
}


@needs_tree_sitter
@pytest.mark.parametrize(
    ("options", "text", "expected"),
    [
        (
            {"s": ["x"], "b": [False], "arr": [["a", "b"]], "d": [{"k": ["v"]}], "x": [1.0]},
            "[f(s=\"x\", b=false, arr=['a', 'b'], d={k: 'v'}, x=1)]",
            (True, None),
        ),
        ({"big": [5]}, "[f(big=5n)]", (True, None)),
        ({"big": [5]}, "[f(big=5)]", (False, "type_error:simple")),
        ({"d": [{"k": ["v"]}]}, "[f(d={k: 'w'})]", (False, "value_error:dict_value")),
        ({"arr": [["a", "b"]]}, '[f(arr=["b", "a"])]', (False, "value_error:list/tuple")),
        ({"s": ["x"]}, "f(s='x'), g(s='y')", (False, "ast_decoder:decoder_wrong_output_format")),
    ],
)
def test_javascript_values_are_converted_by_their_declared_type(options, text, expected):
    entry = _entry("simple_javascript", [_doc("f", JS_PROPERTIES)], [{"f": options}], "javascript")
    assert _judge(entry, text) == expected


@pytest.mark.parametrize(
    ("language", "error_type"), [("java", "type_error:java"), ("javascript", "type_error:js")]
)
def test_java_and_javascript_values_must_be_source_text(language, error_type):
    properties = {"flag": {"type": "boolean" if language == "java" else "Boolean"}}
    verdict = check_entry(_single(properties, {"flag": [True]}, language), [{"f": {"flag": True}}], None)
    assert (verdict.valid, verdict.error_type) == (False, error_type)


def test_a_plain_string_decode_error_means_decoder_failed():
    verdict = check_entry(HYPOT, None, "model timed out")
    assert (verdict.valid, verdict.error_type) == (False, "ast_decoder:decoder_failed")


def test_an_output_outside_the_call_format_is_a_wrong_output_format():
    verdict = check_entry(HYPOT, [{"math.hypot": "x=3"}], None)
    assert (verdict.valid, verdict.error_type) == (False, "ast_decoder:decoder_wrong_output_format")


@pytest.mark.parametrize(
    ("entry", "text", "expected"),
    [
        (HYPOT, "[math.hypot(x=3, y=4)]", ParamScore(4, 4)),
        (HYPOT, "[math.hypot(x=3, y=5)]", ParamScore(4, 3)),
        (HYPOT, "[math.hypot(x=3, y=4, unit='mm', tags=['a-b'])]", ParamScore(4, 3)),
        (HYPOT, "[hypot(x=3, y=4)]", ParamScore(4, 0)),
        (HYPOT, "Sure: [math.hypot(x=3, y=4)]", ParamScore(4, 0)),
        (PARALLEL, "[f(a=2), f(a=3)]", ParamScore(2, 1)),
        (PARALLEL, "[f(a=1), f(a=1)]", ParamScore(2, 2)),
        (MULTIPLE, "[f(a=1)]", ParamScore(1, 0)),
        (_entry("irrelevance", [WEATHER_DOC], None), "[get_weather(city='x')]", ParamScore(0, 0)),
    ],
)
def test_parameter_score_counts_expected_parameters_got_right(entry, text, expected):
    try:
        decoded = decode_strict(text)
    except DecodeError:
        decoded = None
    assert parameter_score(entry, decoded) == expected
