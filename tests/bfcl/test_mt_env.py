"""The multi-turn executor and decoders, one behaviour per case, exact expected strings
(the parity test holds them to bfcl-eval; these say what they are)."""

from __future__ import annotations

import pytest

from pytest_agenteval.tasks.bfcl._decode import DecodeError
from pytest_agenteval.tasks.bfcl._mt_decode import calls_from_text, calls_from_tool_calls, nested_value
from pytest_agenteval.tasks.bfcl._mt_env import Environment, format_result, missing_requirements
from tests._oracle import require_oracle


@pytest.fixture(scope="module", autouse=True)
def _bfcl_eval_environments() -> None:
    if missing_requirements():
        require_oracle(
            f"bfcl-eval's environments are not installed: pip install {' '.join(missing_requirements())}"
        )


FILES = {"root": {"home": {"type": "directory", "contents": {"a.txt": {"type": "file", "content": "hi"}}}}}


@pytest.fixture
def env() -> Environment:
    return Environment(["GorillaFileSystem", "MathAPI"], {"GorillaFileSystem": FILES})


@pytest.mark.parametrize(
    ("call", "result"),
    [
        ("pwd()", '{"current_working_directory": "/home"}'),
        ("cat(file_name='a.txt')", '{"file_content": "hi"}'),
        ("cat('a.txt')", '{"file_content": "hi"}'),  # positional arguments reach the method
        ("add(a=1, b=2)", '{"result": 3}'),
        (
            "add(a=1, b=add(a=1, b=1))",
            '{"error": "Both inputs must be numbers"}',  # the inner result is a dict,
        ),
        ("nope(x=1)", "Error during execution: name 'nope' is not defined"),
        ("os.pwd()", "Error during execution: name 'os' is not defined"),
        ("pwd(x=pwd)", "Error during execution: name 'pwd' is not defined"),  # a bare name is unknown
        ("exit(code=1)", "Error during execution: Function call exit is not allowed."),
        ("rm(file_name='b.txt')", '{"error": "rm: cannot remove \'b.txt\': No such file or directory"}'),
        ("cd(folder='x'", "Error during execution: '(' was never closed (<string>, line 1)"),
        ("cd(**{'folder': 'x'})", "Error during execution: argument unpacking is not supported"),
    ],
)
def test_calls_are_dispatched_to_the_environment_methods(env: Environment, call: str, result: str) -> None:
    assert env.execute_one(call) == result


def test_state_persists_across_calls(env: Environment) -> None:
    assert env.execute(["mkdir(dir_name='d')", "cd(folder='d')", "pwd()"])[-1] == (
        '{"current_working_directory": "/home/d"}'
    )


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("s", "'s'"),
        ({"a": 1}, "{'a': 1}"),
        ({"f": {"x": 1}}, "f(x=1)"),
        ([{"a": 1}], "[{'a': 1}]"),
        ({1: 2}, "{'1': 2}"),
    ],
)
def test_argument_values_render_as_the_official_execution_list(value, text) -> None:
    assert nested_value(value) == text


def test_text_and_tool_calls_become_call_strings() -> None:
    assert calls_from_text("[cd(folder='d'), ls(a=True)]") == ["cd(folder='d')", "ls(a=True)"]
    assert calls_from_tool_calls([{"cd": '{"folder": "d"}'}, {"ls": '{"a": true}'}]) == [
        "cd(folder='d')",
        "ls(a=True)",
    ]
    for bad in ("Done.", "[cd(folder={})]"):
        with pytest.raises(DecodeError):
            calls_from_text(bad)
    with pytest.raises(DecodeError):
        calls_from_tool_calls("a text reply")


@pytest.mark.parametrize(
    ("value", "text"), [("x", "x"), ({"a": 1}, '{"a": 1}'), ([1], "[1]"), (None, "None")]
)
def test_results_are_formatted_as_officially(value, text) -> None:
    assert format_result(value) == text
