"""Model inputs for BFCL, as the official generation code builds them.

Prompting style: the function docs go into a system prompt (the official
default: Python return format, JSON function docs, plaintext, classic style).
Native style: the docs become OpenAI ``tools``. In both, the docs first get
the official language hints (``add_language_specific_hint_to_function_doc``):
Java and JavaScript parameters are declared as strings holding source text.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_agenteval.tasks.bfcl._data import BfclEntry

_PERSONA = "You are an expert in composing functions."
_TASK = (
    "You are given a question and a set of possible functions. Based on the question, you will "
    "need to make one or more function/tool calls to achieve the purpose. If none of the "
    "functions can be used, point it out. If the given question lacks the parameters required "
    "by the function, also point it out."
)
_OUTPUT_FORMAT = "[func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)]"
_TOOL_CALL_FORMAT = (
    "You should only return the function calls in your response.\n\nIf you decide to invoke any "
    f"of the function(s), you MUST put it in the format of {_OUTPUT_FORMAT}.  You SHOULD NOT "
    "include any other text in the response."  # two spaces: the empty `param_types` slot
)
_MULTITURN_BEHAVIOR = (
    "At each turn, you should try your best to complete the tasks requested by the user within "
    "the current turn. Continue to output functions to call until you have fulfilled the user's "
    "request to the best of your ability. Once you have no more functions to call, the system "
    "will consider the current turn complete and proceed to the next turn or task."
)

_LANGUAGE_HINT = {
    "python": " Note that the provided function is in Python 3 syntax.",
    "java": " Note that the provided function is in Java 8 SDK syntax.",
    "javascript": " Note that the provided function is in JavaScript syntax.",
}
_LANGUAGE_NAME = {"java": "Java", "javascript": "JavaScript"}
_LIST_TYPES = {"java": ("ArrayList", "Array"), "javascript": ("array",)}

# GORILLA_TO_OPENAPI of bfcl-eval: BFCL types to JSON-schema types.
OPENAPI_TYPES: dict[str, str] = {
    "integer": "integer",
    "number": "number",
    "float": "number",
    "string": "string",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "dict": "object",
    "object": "object",
    "tuple": "array",
    "any": "string",
    "byte": "integer",
    "short": "integer",
    "long": "integer",
    "double": "number",
    "char": "string",
    "ArrayList": "array",
    "Array": "array",
    "HashMap": "object",
    "Hashtable": "object",
    "Queue": "array",
    "Stack": "array",
    "Any": "string",
    "String": "string",
    "Bigint": "integer",
}


def system_prompt(functions: Sequence[Mapping[str, Any]]) -> str:
    """The official default system prompt with ``functions`` as indented JSON."""
    available_tools = (
        "Here is a list of functions in json format that you can invoke.\n"
        f"{json.dumps(list(functions), indent=4)}\n"
    )
    # Official template: persona and task are joined without a space.
    return f"{_PERSONA}{_TASK}\n\n{_TOOL_CALL_FORMAT}\n\n{_MULTITURN_BEHAVIOR}\n\n{available_tools}"


def prompt_functions(functions: Sequence[Mapping[str, Any]], language: str | None) -> list[dict]:
    """Function docs with the official language hints (a deep copy); ``language=None``
    leaves them as they are (the docs multi-turn entries hand out later get none)."""
    docs = copy.deepcopy(list(functions))
    if language is None:
        return docs
    for doc in docs:
        doc["description"] = doc.get("description", "") + _LANGUAGE_HINT[language]
        if language in _LANGUAGE_NAME:
            for schema in doc["parameters"]["properties"].values():
                _as_source_text(schema, language)
    return docs


def _as_source_text(schema: dict[str, Any], language: str) -> None:
    name, declared = _LANGUAGE_NAME[language], schema["type"]
    if declared == "any":
        note = f" This parameter can be of any type of {name} object in string representation."
    else:
        note = f" This is {name} {declared} type parameter in string representation."
    if declared in _LIST_TYPES[language]:
        note += (
            f" The list elements are of type {schema['items']['type']};"
            " they are not in string representation."
        )
        del schema["items"]
    if language == "javascript" and declared == "dict" and "properties" in schema:
        note += (
            " The dictionary entries have the following schema; they are not in string "
            f"representation. {json.dumps(schema['properties'])}"
        )
        del schema["properties"]
    schema["description"] = schema.get("description", "") + note
    schema["type"] = "string"


def prompt_messages(entry: BfclEntry) -> list[dict[str, Any]]:
    """Chat messages for the prompting style: the system prompt, then the first turn."""
    messages = copy.deepcopy(entry.question[0])
    prompt = system_prompt(prompt_functions(entry.functions, entry.language))
    # A question that brings its own system message gets the prompt in front of it.
    if messages and messages[0].get("role") == "system":
        messages[0]["content"] = f"{prompt}\n\n{messages[0]['content']}"
    else:
        messages.insert(0, {"role": "system", "content": prompt})
    return messages


def native_messages(entry: BfclEntry) -> list[dict[str, Any]]:
    """Chat messages for native function calling: the first turn as is."""
    return copy.deepcopy(entry.question[0])


def native_tools(
    functions: Sequence[Mapping[str, Any]], language: str | None = "python"
) -> list[dict[str, Any]]:
    """OpenAI ``tools``, as the official ``convert_to_tool`` builds them for OpenAI models.

    Dots in names become underscores (OpenAI rejects them); map the names
    back with ``tool_name_map``.
    """
    tools = []
    for doc in prompt_functions(functions, language):
        doc["name"] = _tool_name(doc["name"])
        doc["parameters"]["type"] = "object"
        doc["parameters"]["properties"] = _openapi_properties(doc["parameters"]["properties"])
        tools.append({"type": "function", "function": doc})
    return tools


def tool_name_map(functions: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Tool names as sent to the model, mapped to the BFCL function names."""
    return {_tool_name(doc["name"]): doc["name"] for doc in functions}


def _tool_name(name: str) -> str:
    return re.sub(r"\.", "_", name)


def _openapi_properties(properties: dict[str, Any]) -> dict[str, Any]:
    """``_cast_to_openai_type``: JSON-schema types, floats noted, nesting two levels deep."""
    for schema in properties.values():
        declared = schema.get("type")
        if declared == "float":
            schema["format"] = "float"
            schema["description"] = schema.get("description", "") + " This is a float type value."
        schema["type"] = OPENAPI_TYPES.get(declared, "string") if declared else "string"
        if schema["type"] not in ("array", "object"):
            continue
        if "properties" in schema:
            schema["properties"] = _openapi_properties(schema["properties"])
        elif "items" in schema:
            items = schema["items"]
            items["type"] = OPENAPI_TYPES.get(items.get("type"), "string")
            if items["type"] == "array" and "items" in items:
                items["items"]["type"] = OPENAPI_TYPES.get(items["items"].get("type"), "string")
            elif items["type"] == "object" and "properties" in items:
                items["properties"] = _openapi_properties(items["properties"])
    return properties
