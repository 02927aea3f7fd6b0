"""Decoding model output into ``[{func_name: {param: value}}]``."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest

from pytest_agenteval.tasks.bfcl import DecodeError, decode_lenient, decode_native, decode_strict

# Java and JavaScript decoding parses with tree-sitter (the 'bfcl' extra).
needs_tree_sitter = pytest.mark.skipif(
    importlib.util.find_spec("tree_sitter_java") is None
    or importlib.util.find_spec("tree_sitter_javascript") is None,
    reason="pip install tree-sitter==0.21.3 tree-sitter-java==0.21.0 tree-sitter-javascript==0.21.4",
)

FAILED = "ast_decoder:decoder_failed"
WRONG_FORMAT = "ast_decoder:decoder_wrong_output_format"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[math.hypot(x=3, y=4)]", [{"math.hypot": {"x": 3, "y": 4}}]),
        ("math.hypot(x=3, y=4)", [{"math.hypot": {"x": 3, "y": 4}}]),
        ("```\n[f(a=1)]\n```", [{"f": {"a": 1}}]),
        ("  \n[f(a='x')]\n", [{"f": {"a": "x"}}]),
        ("f(a=1), g(b=2)", [{"f": {"a": 1}}, {"g": {"b": 2}}]),
        ("[a.b.c(d=True, e=None)]", [{"a.b.c": {"d": True, "e": None}}]),
        ("[f(a=2+3, b=2*3.5, c='ab' * 2)]", [{"f": {"a": 5, "b": 7.0, "c": "abab"}}]),
        ("[f(a=x, b=-5, c=-2.5)]", [{"f": {"a": "x", "b": -5, "c": -2.5}}]),
        ("[f(a=+5)]", [{"f": {"a": -5}}]),  # official quirk: every unary op negates
        ("[f(1, 2, a=3)]", [{"f": {"a": 3}}]),  # positional arguments are dropped
        ("[f(a=g(b=1), c=g(1))]", [{"f": {"a": {"g": {"b": 1}}, "c": "g(1)"}}]),
        (
            "[f(a=(1, 2), b=[1, [2]], c={'k': 'v'})]",
            [{"f": {"a": (1, 2), "b": [1, [2]], "c": {"k": "v"}}}],
        ),
        ("[f(a=x[0], b=...)]", [{"f": {"a": "x[0]", "b": "..."}}]),
        ("[f(**opts)]", [{"f": {None: "opts"}}]),
        ("[f(a=1, a=2)]", [{"f": {"a": 2}}]),
        ("[f()]", [{"f": {}}]),
        ("[]", []),
        ("", []),  # brackets are added, so empty output is an empty call list
    ],
)
def test_strict_python_decodes_like_the_official_decoder(text, expected):
    assert decode_strict(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "```python\n[f(a=1)]\n```",  # the leftover `python` makes a subscript
        "Sure: [f(a=1)]",
        "[f(a=1)] Let me know!",
        "f(a=1)\ng(b=2)",  # two calls without a comma
        "[f(a=np.pi)]",
        "[f(a=lambda x: x)]",
        "[f(a={1, 2})]",
        "[f(a=f'{x}')]",
        "[f(a=-x)]",
        "[f(a=1 / 0)]",
        "[f(a=undefined + 1)]",
        "[f(a=2 ** 100000)]",  # refused instead of evaluated
        "[f(a=[0] * 10 ** 7)]",
        "[f(a=1)] + [g(b=2)]",
        "[[f(a=1)]]",
        '[{"name": "f", "arguments": {"a": 1}}]',
        "hello world",
    ],
)
def test_strict_python_rejects_what_the_official_decoder_rejects(text):
    with pytest.raises(DecodeError) as raised:
        decode_strict(text)
    assert raised.value.error_type == FAILED


@needs_tree_sitter
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            '[Foo.bar(a="x", b=5, c=new int[]{1, 2})]',
            [{"Foo.bar": {"a": "x", "b": "5", "c": "new int[]{1,2}"}}],
        ),
        ("f(a=x, b=true, c=Foo.class)", [{"f": {"a": "x", "b": "true", "c": "Foo.class"}}]),
        ("f(a=-5, b=1.5f, d=2.0e3)", [{"f": {"a": "-5", "b": "1.5f", "d": "2.0e3"}}]),
        (
            'f(c=\'z\', l=new ArrayList<>(Arrays.asList("a", "b")))',
            [{"f": {"c": "z", "l": 'new ArrayList<>(Arrays.asList("a", "b"))'}}],
        ),
        # Official quirk: the anonymous class body of a HashMap is dropped.
        (
            'f(m=new HashMap<String, String>() {{ put("a", "b"); }})',
            [{"f": {"m": "new HashMap<String,String>()"}}],
        ),
        # Official quirk: byte offsets slice the text, garbling it after non-ASCII.
        ('f(a="é", b="xyz")', [{"f": {"a": 'é"', "=": 'yz"'}}]),
        ("x.f(a=1).g(b=2)", [{"x.f(a=1).g": {"b": "2"}}]),
    ],
)
def test_strict_java_keeps_values_as_source_text(text, expected):
    assert decode_strict(text, "java") == expected


@needs_tree_sitter
@pytest.mark.parametrize(
    ("text", "error_type"),
    [
        ("foo()", FAILED),  # tree-sitter-java reports an ERROR node
        ('[f(a="x"), g(b=1)]', FAILED),
        ("[f(a=1, a=2)]", FAILED),
        ("hello world", WRONG_FORMAT),  # parses, but holds no call
        ("", WRONG_FORMAT),
    ],
)
def test_strict_java_failures_carry_the_official_error_type(text, error_type):
    with pytest.raises(DecodeError) as raised:
        decode_strict(text, "java")
    assert raised.value.error_type == error_type


@needs_tree_sitter
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[f(a="x", b=5, c=[1, 2])]', [{"f": {"a": "x", "b": "5", "c": "[1, 2]"}}]),
        ("f(a='y', d={k: 'v'})", [{"f": {"a": "y", "d": "{k: 'v'}"}}]),
        ("f(x)", [{"f": {None: "x"}}]),
        ("f(false)", [{"f": {}}]),  # official: positional `true` counts, `false` does not
        ("obj.f(a=`t`)", [{"obj.f": {"a": "`t`"}}]),
    ],
)
def test_strict_javascript_keeps_values_as_source_text(text, expected):
    assert decode_strict(text, "javascript") == expected


@needs_tree_sitter
@pytest.mark.parametrize(
    ("text", "error_type"),
    [
        ("f(x, true)", FAILED),  # two positional arguments share the None key
        ("f(a=1, a=2)", FAILED),
        ("hello world", FAILED),
        ("f(a=1), g(b=2)", WRONG_FORMAT),  # a sequence expression, not a call
        ("new F(a=1)", WRONG_FORMAT),
        ("let x = 1", WRONG_FORMAT),
    ],
)
def test_strict_javascript_failures_carry_the_official_error_type(text, error_type):
    with pytest.raises(DecodeError) as raised:
        decode_strict(text, "javascript")
    assert raised.value.error_type == error_type


def test_strict_rejects_an_unknown_language():
    with pytest.raises(ValueError, match="unsupported BFCL language 'rust'"):
        decode_strict("[f(a=1)]", "rust")


def _tool_call(name, arguments):
    return {"id": "call_0", "type": "function", "function": {"name": name, "arguments": arguments}}


@pytest.mark.parametrize(
    ("tool_calls", "expected"),
    [
        (
            [_tool_call("get_weather", '{"city": "Paris", "days": 3}')],
            [{"get_weather": {"city": "Paris", "days": 3}}],
        ),
        ([_tool_call("math_hypot", '{"x": 3}')], [{"math.hypot": {"x": 3}}]),
        (
            [SimpleNamespace(function=SimpleNamespace(name="f", arguments='{"a": [1, 2]}'))],
            [{"f": {"a": [1, 2]}}],
        ),
        ([_tool_call("f", {"a": 1})], [{"f": {"a": 1}}]),
        ([], []),
    ],
)
def test_native_tool_calls_decode_their_json_arguments(tool_calls, expected):
    assert decode_native(tool_calls, {"math_hypot": "math.hypot"}) == expected


@pytest.mark.parametrize(
    ("tool_calls", "error_type"),
    [
        (None, FAILED),  # a text reply has no tool calls
        ([_tool_call("f", '{"a": 1')], FAILED),
        ([_tool_call("f", "")], FAILED),
        ([_tool_call("f", "[1, 2]")], WRONG_FORMAT),
        ([{"function": {"arguments": "{}"}}], FAILED),
    ],
)
def test_native_failures_match_the_official_fc_handlers(tool_calls, error_type):
    with pytest.raises(DecodeError) as raised:
        decode_native(tool_calls)
    assert raised.value.error_type == error_type


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[f(a=1)]", [{"f": {"a": 1}}]),
        ('[{"name": "f", "arguments": {"a": 1}}]', [{"f": {"a": 1}}]),
        ('{"name": "f", "parameters": {"a": 1}}', [{"f": {"a": 1}}]),
        ('{"function": "f", "parameters": {"a": "x"}}', [{"f": {"a": "x"}}]),
        ('{"name": "f", "arguments": "{\\"a\\": 2}"}', [{"f": {"a": 2}}]),
        ('{"type": "function", "function": {"name": "f", "arguments": "{}"}}', [{"f": {}}]),
        ('{"tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}', [{"f": {}}]),
        ('[{"f": {"a": 1}}, {"g": {}}]', [{"f": {"a": 1}}, {"g": {}}]),
        ("```python\n[f(a=1)]\n```", [{"f": {"a": 1}}]),
        ('```json\n[{"name": "f", "arguments": {"a": 1}}]\n```', [{"f": {"a": 1}}]),
        ("<think>call f? yes.</think>\n[f(a=1)]", [{"f": {"a": 1}}]),
        ('<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>', [{"f": {"a": 1}}]),
        ("Sure! Here it is: [f(a=1), g(b='x')]. Done.", [{"f": {"a": 1}}, {"g": {"b": "x"}}]),
        (
            "I will call f(a=1) and then g(b=h(c=2)).",
            [{"f": {"a": 1}}, {"g": {"b": {"h": {"c": 2}}}}],
        ),
        ('The answer: {"name": "f", "arguments": {"a": 1}} should work.', [{"f": {"a": 1}}]),
    ],
)
def test_lenient_accepts_json_fences_tags_and_prose(text, expected):
    assert decode_lenient(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "I cannot help with that (sorry).",
        "None of the functions apply; print() would not help either.",
        '{"answer": 42}',
    ],
)
def test_lenient_still_finds_no_call_in_plain_prose(text):
    with pytest.raises(DecodeError):
        decode_lenient(text)


def test_lenient_keeps_the_strict_empty_list_for_empty_output():
    assert decode_lenient("") == []


def test_lenient_with_known_names_accepts_positional_calls_of_those_names_only():
    text = "Use get_weather('Paris') or maybe (not) lookup(1)."
    assert decode_lenient(text, function_names=["get_weather"]) == [{"get_weather": {}}]


@needs_tree_sitter
def test_lenient_java_renders_json_values_as_source_text():
    text = '[{"name": "Foo.bar", "arguments": {"flag": true, "n": 5, "s": "x"}}]'
    assert decode_lenient(text, "java") == [{"Foo.bar": {"flag": "true", "n": "5", "s": "x"}}]


@needs_tree_sitter
def test_lenient_java_finds_a_call_in_prose():
    text = 'I would call Foo.bar(a="x", b=5) here.'
    assert decode_lenient(text, "java") == [{"Foo.bar": {"a": "x", "b": "5"}}]
