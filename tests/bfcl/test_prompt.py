"""Model inputs: the official default system prompt and OpenAI tools."""

from __future__ import annotations

import json

from pytest_agenteval.tasks.bfcl import (
    BfclEntry,
    native_messages,
    native_tools,
    prompt_functions,
    prompt_messages,
    system_prompt,
    tool_name_map,
)

HYPOT = {
    "name": "math.hypot",
    "description": "Euclidean norm.",
    "parameters": {
        "type": "dict",
        "properties": {
            "x": {"type": "float", "description": "First."},
            "point": {"type": "tuple", "items": {"type": "integer"}, "description": "P."},
            "options": {
                "type": "dict",
                "properties": {"scale": {"type": "float", "description": "S."}},
                "description": "O.",
            },
            "mode": {"type": "any", "description": "M."},
        },
        "required": ["x"],
    },
}

OFFICIAL_PROMPT_HEAD = (
    "You are an expert in composing functions.You are given a question and a set of possible "
    "functions. Based on the question, you will need to make one or more function/tool calls to "
    "achieve the purpose. If none of the functions can be used, point it out. If the given "
    "question lacks the parameters required by the function, also point it out.\n\n"
    "You should only return the function calls in your response.\n\n"
    "If you decide to invoke any of the function(s), you MUST put it in the format of "
    "[func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)]."
    "  You SHOULD NOT include any other text in the response.\n\n"
    "At each turn, you should try your best to complete the tasks requested by the user within "
    "the current turn. Continue to output functions to call until you have fulfilled the user's "
    "request to the best of your ability. Once you have no more functions to call, the system "
    "will consider the current turn complete and proceed to the next turn or task.\n\n"
    "Here is a list of functions in json format that you can invoke.\n"
)


def _entry(question, language="python"):
    category = {"python": "simple_python", "java": "simple_java"}[language]
    return BfclEntry(f"{category}_0", category, question, [HYPOT], [], language)


def test_the_system_prompt_is_the_official_default_with_indented_json():
    assert system_prompt([HYPOT]) == OFFICIAL_PROMPT_HEAD + json.dumps([HYPOT], indent=4) + "\n"


def test_prompt_messages_put_the_system_prompt_first():
    messages = prompt_messages(_entry([[{"role": "user", "content": "q"}]]))
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == system_prompt(prompt_functions([HYPOT], "python"))
    assert prompt_functions([HYPOT], "python")[0]["description"] == (
        "Euclidean norm. Note that the provided function is in Python 3 syntax."
    )


def test_an_existing_system_message_follows_the_prompt():
    question = [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "q"}]]
    messages = prompt_messages(_entry(question))
    assert messages[0]["content"].endswith("\n\nBe brief.")
    assert question[0][0]["content"] == "Be brief."  # the entry is not modified


def test_java_parameters_become_strings_of_source_text():
    doc = {
        "name": "A.b",
        "description": "D.",
        "parameters": {
            "type": "dict",
            "properties": {
                "ids": {"type": "ArrayList", "items": {"type": "long"}, "description": "Ids."},
                "o": {"type": "any", "description": "O."},
            },
        },
    }
    (converted,) = prompt_functions([doc], "java")
    assert converted["description"] == "D. Note that the provided function is in Java 8 SDK syntax."
    assert converted["parameters"]["properties"] == {
        "ids": {
            "type": "string",
            "description": "Ids. This is Java ArrayList type parameter in string representation. "
            "The list elements are of type long; they are not in string representation.",
        },
        "o": {
            "type": "string",
            "description": "O. This parameter can be of any type of Java object in string representation.",
        },
    }


def test_native_tools_follow_the_official_openai_conversion():
    (tool,) = native_tools([HYPOT])
    assert tool["type"] == "function"
    function = tool["function"]
    assert function["name"] == "math_hypot"
    assert function["parameters"]["type"] == "object"
    assert function["parameters"]["properties"] == {
        "x": {
            "type": "number",
            "format": "float",
            "description": "First. This is a float type value.",
        },
        "point": {"type": "array", "items": {"type": "integer"}, "description": "P."},
        "options": {
            "type": "object",
            "properties": {
                "scale": {
                    "type": "number",
                    "format": "float",
                    "description": "S. This is a float type value.",
                }
            },
            "description": "O.",
        },
        "mode": {"type": "string", "description": "M."},
    }
    assert HYPOT["parameters"]["properties"]["x"]["type"] == "float"  # input untouched


def test_tool_names_map_back_to_function_names():
    assert tool_name_map([HYPOT, {"name": "get_weather"}]) == {
        "math_hypot": "math.hypot",
        "get_weather": "get_weather",
    }


def test_native_messages_are_the_first_turn():
    question = [[{"role": "user", "content": "q"}], [{"role": "user", "content": "later"}]]
    assert native_messages(_entry(question)) == [{"role": "user", "content": "q"}]
