"""Java and JavaScript value conversion, as the official ``type_convertor`` does.

The decoder keeps Java/JavaScript argument values as source text. Before
type checking, the official checker converts that text by the declared type
with these regular expressions; text that does not fit the type stays a
string (and then fails the type check). The regexes define the behaviour, so
they are kept as they are, even where they look odd (noted inline).
"""

from __future__ import annotations

import re
from typing import Any

JAVA_TYPES: dict[str, type] = {
    "byte": int,
    "short": int,
    "integer": int,
    "float": float,
    "double": float,
    "long": int,
    "boolean": bool,
    "char": str,
    "Array": list,
    "ArrayList": list,
    "Set": set,
    "HashMap": dict,
    "Hashtable": dict,
    "Queue": list,
    "Stack": list,
    "String": str,
    "any": str,
}

JS_TYPES: dict[str, type] = {
    "String": str,
    "integer": int,
    "float": float,
    "Bigint": int,
    "Boolean": bool,
    "dict": dict,
    "array": list,
    "any": str,
}


class UnsupportedTypeError(ValueError):
    """A declared type the official converter cannot convert."""


_INTEGER = r"^-?\d+$"
_JAVA_FLOAT = r"^-?\d+(\.\d+)?([eE][+-]?\d+)?[fF]$"
_JAVA_DOUBLE = r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$"


def convert_java(value: str, declared: str, item_type: str | None = None) -> Any:
    """Convert Java source text by its declared type; unconvertible text stays a string."""
    if declared in ("byte", "short", "integer"):
        return int(value) if re.match(_INTEGER, value) else value
    if declared == "float":
        return float(re.sub(r"[fF]$", "", value)) if re.match(_JAVA_FLOAT, value) else value
    if declared == "double":
        return float(value) if re.match(_JAVA_DOUBLE, value) else value
    if declared == "long":
        return int(re.sub(r"[lL]$", "", value)) if re.match(r"^-?\d+[lL]$", value) else value
    if declared == "boolean":
        return value == "true" if value in ("true", "false") else value
    if declared == "ArrayList":
        return _java_arraylist(value, item_type)
    if declared == "Array":
        return _java_array(value, item_type)
    if declared == "HashMap":
        return _java_hashmap(value)
    # Official quirk: the char pattern can never match, so a char stays as written.
    if declared in ("char", "String", "any"):
        return value
    raise UnsupportedTypeError(f"the official checker cannot convert Java type {declared!r}")


def _java_element(text: str, item_type: str | None) -> Any:
    if item_type in ("char", "String"):
        return text[1:-1]  # drop the quotes
    return convert_java(text, item_type) if item_type else java_literal(text)


def _java_arraylist(text: str, item_type: str | None) -> Any:
    as_list = re.search(r"new\s+ArrayList<\w*>\(Arrays\.asList\((.+?)\)\)", text)
    if as_list:
        return [_java_element(part.strip(), item_type) for part in as_list.group(1).split(",")]
    adds = re.search(r"new\s+ArrayList<\w*>\(\)\s*\{\{\s*(.+?)\s*\}\}", text, re.DOTALL)
    if adds:
        found = re.findall(r"add\((.+?)\)", adds.group(1))
        return [_java_element(part.strip(), item_type) for part in found]
    if re.search(r"new\s+ArrayList<\w*>\(\)", text):
        return []
    return text


def _java_array(text: str, item_type: str | None) -> Any:
    match = re.search(r"new\s+\w+\[\]\s*\{(.*?)\}", text)
    if not match:
        return text
    parts = [part.strip() for part in match.group(1).split(",") if part.strip()]
    # Official quirk: String elements keep their quotes here (unlike ArrayList).
    if item_type:
        return [convert_java(part, item_type) for part in parts]
    return [java_literal(part) for part in parts]


def _java_hashmap(text: str) -> Any:
    pattern = r"new\s+HashMap<.*?>\s*\(\)\s*\{\s*\{?\s*(.*?)\s*\}?\s*\}"
    match = re.search(pattern, text, re.DOTALL)
    if match:
        puts = re.findall(r"put\(\"(.*?)\",\s*(.*?)\)", match.group(1))
        return {key: java_literal(raw.strip()) for key, raw in puts}
    if re.search(r"new\s+HashMap<.*?>\s*\(\)", text):
        return {}
    return text


def java_literal(text: str) -> Any:
    """A Java literal without a declared type: boolean, string, long, float, int, or text."""
    if text in ("true", "false"):
        return text == "true"
    if text.startswith('"') and text.endswith('"'):
        return text[1:-1]
    if re.match(r"^-?\d+[lL]$", text):
        return int(text[:-1])
    if re.match(_JAVA_FLOAT, text):
        return float(re.sub(r"[fF]$", "", text))
    return _number_or_text(text)


def _number_or_text(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def convert_js(value: str, declared: str, item_type: str | None = None) -> Any:
    """Convert JavaScript source text by its declared type; unconvertible text stays a string."""
    if declared == "String":
        return value[1:-1] if _quoted(value) else value
    if declared == "integer":
        return int(value) if re.match(_INTEGER, value) else value
    if declared == "float":
        return float(value) if re.match(r"^-?\d+(\.\d+)?$", value) else value
    if declared == "Bigint":
        return int(value[:-1]) if re.match(r"^-?\d+n$", value) else value
    if declared == "Boolean":
        return value == "true" if value in ("true", "false") else value
    if declared == "dict":
        return _js_object(value.strip())
    if declared == "array":
        return _js_array(value.strip(), item_type)
    if declared == "any":
        return value
    raise UnsupportedTypeError(f"the official checker cannot convert JavaScript type {declared!r}")


def _quoted(text: str) -> bool:
    return (text.startswith('"') and text.endswith('"')) or (text.startswith("'") and text.endswith("'"))


_JS_ARRAY_2D = r"\[\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\]|\bnew\s+Array\(\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\)"
_JS_ARRAY = r"\[(.*?)\]|\bnew\s+Array\((.*?)\)"


def _js_array(code: str, item_type: str | None) -> Any:
    try:
        nested = re.match(_JS_ARRAY_2D, code)
        if nested:
            # Official: element types are inferred here, the declared item type is ignored.
            rows = []
            for index, row in enumerate(re.findall(r"\[(.*?)\]", nested.group(0))):
                row = row.strip()
                if index == 0 and row.startswith("["):
                    row = row[1:]
                rows.append([js_literal(part.strip()) for part in row.split(",")])
            return rows
        match = re.match(_JS_ARRAY, code)
        if not match:
            return code
        inner = match.group(1) if match.group(1) is not None else match.group(2)
        parts = inner.strip().split(",") if inner and inner.strip() else []
        if not item_type:
            return [js_literal(part.strip()) for part in parts]
        return [_js_element(part.strip(), item_type) for part in parts]
    except (ValueError, IndexError, TypeError, RecursionError):
        return code  # official: any failure leaves the text as is


def _js_element(text: str, item_type: str) -> Any:
    # Official: a quoted element passes "String" as the element's own item type.
    inner_type = "String" if text.startswith(("'", '"')) else None
    return convert_js(text, item_type, inner_type)


def _js_object(code: str) -> Any:
    if code == "{}":
        return {}
    match = re.match(r"\{(.*?)\}", code)
    if not match:
        return code
    pairs = re.findall(r"([^:]+):\s*(.*?)(?:,\s*(?=[^,]+:)|$)", match.group(1))
    result: dict[str, Any] = {}
    for raw_key, raw_value in pairs:
        key, value = raw_key.strip().strip("'\""), raw_value.strip()
        if value.startswith("[") and value.endswith("]"):
            result[key] = _js_array(value, None)
        elif value.startswith("{") and value.endswith("}"):
            result[key] = _js_object(value)
        else:
            # Official quirk: quotes are stripped first, so '5' becomes the number 5.
            result[key] = js_literal(value.strip("'\""))
    return result


def js_literal(text: str) -> Any:
    """A JavaScript literal without a declared type: boolean, string, int, float, or text."""
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    if _quoted(text):
        return text[1:-1]
    return _number_or_text(text)
