"""Turn model output into the official call format ``[{func_name: {param: value}}]``.

``decode_strict`` reproduces the official prompting decoder of bfcl-eval
2026.3.23 (``default_decode_ast_prompting``): its verdict is the headline one.
``decode_native`` reproduces the official function-calling handlers.
``decode_lenient`` (in ``_lenient``) accepts more formats for the side metric.
"""

from __future__ import annotations

import ast
import json
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_agenteval.tasks.bfcl._source_calls import SourceParseError, decode_source_calls

Call = dict[str, dict[Any, Any]]

FAILED = "ast_decoder:decoder_failed"
WRONG_FORMAT = "ast_decoder:decoder_wrong_output_format"


class DecodeError(ValueError):
    """The output is not a call list the official decoder accepts.

    ``wrong_format`` marks output that parsed but is not in the call format
    (the official ``decoder_wrong_output_format``) rather than a parse failure.
    """

    def __init__(self, message: str, *, wrong_format: bool = False) -> None:
        super().__init__(message)
        self.wrong_format = wrong_format

    @property
    def error_type(self) -> str:
        return WRONG_FORMAT if self.wrong_format else FAILED


def is_call_list(decoded: object) -> bool:
    """The official ``is_function_calling_format_output``: a list of ``{name: {params}}``."""
    if type(decoded) is not list:
        return False
    return all(
        type(item) is dict and len(item) == 1 and type(next(iter(item.values()))) is dict for item in decoded
    )


def decode_strict(text: str, language: str = "python") -> list[Call]:
    """Decode ``text`` exactly as the official prompting decoder does."""
    if not isinstance(text, str):
        raise DecodeError(f"expected text, got {type(text).__name__}")
    body = _bracketed(text)
    if language == "python":
        return decode_python_calls(body)
    if language in ("java", "javascript"):
        try:
            # The official runner drops the first and last character (the brackets).
            decoded = decode_source_calls(body[1:-1], language)
        except (SourceParseError, UnicodeError, RecursionError) as exc:
            raise DecodeError(f"invalid {language} call: {exc}") from None
        if not is_call_list(decoded):
            raise DecodeError(f"no {language} call found", wrong_format=True)
        return decoded
    raise ValueError(f"unsupported BFCL language {language!r}")


def _bracketed(text: str) -> str:
    # Official step 1: strip backticks/newlines/spaces, then add missing brackets.
    body = text.strip("`\n ")
    if not body.startswith("["):
        body = "[" + body
    if not body.endswith("]"):
        body = body + "]"
    return body


def decode_python_calls(source: str) -> list[Call]:
    """Parse Python call syntax: one call, or a list/tuple whose elements are all calls."""
    try:
        return _python_calls(ast.parse(source.strip().strip("'"), mode="eval").body)
    except DecodeError:
        raise
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError) as exc:
        raise DecodeError(f"invalid call syntax: {exc}") from None


def _python_calls(node: ast.expr) -> list[Call]:
    if isinstance(node, ast.Call):
        return [_resolve_call(node)]
    elements = getattr(node, "elts", None)
    if elements is None:
        raise DecodeError(f"expected a list of calls, got {type(node).__name__}")
    calls = []
    for element in elements:
        if not isinstance(element, ast.Call):
            raise DecodeError(f"list element is {type(element).__name__}, not a call")
        calls.append(_resolve_call(element))
    return calls


def call_name(func: ast.expr) -> str:
    """Dotted name of a call target; parts that are not names are dropped, as officially."""
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


def _resolve_call(node: ast.Call) -> Call:
    # Only keyword arguments count; positional ones are dropped silently.
    return {call_name(node.func): {kw.arg: _resolve_value(kw.value) for kw in node.keywords}}


def _resolve_value(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):
        # Official quirk: any unary operator negates a constant operand (`+5` -> -5).
        if not isinstance(node.operand, ast.Constant):
            raise DecodeError("unary operator on a non-constant")
        return -node.operand.value
    if isinstance(node, ast.List):
        return [_resolve_value(item) for item in node.elts]
    if isinstance(node, ast.Dict):
        if any(key is None for key in node.keys):
            raise DecodeError("dict unpacking is not a value")
        pairs = zip(node.keys, node.values, strict=True)
        return {_resolve_value(k): _resolve_value(v) for k, v in pairs}
    if isinstance(node, ast.BinOp):
        return _evaluate(node)
    if isinstance(node, ast.Name):
        return node.id  # a bare name becomes its string
    if isinstance(node, ast.Call):
        return _resolve_call(node) if node.keywords else ast.unparse(node)
    if isinstance(node, ast.Tuple):
        return tuple(_resolve_value(item) for item in node.elts)
    if isinstance(node, ast.Subscript):
        return f"{ast.unparse(node.value)}[{ast.unparse(node.slice)}]"
    raise DecodeError(f"unsupported value syntax {type(node).__name__}")


_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.BitAnd: operator.and_,
    ast.MatMult: operator.matmul,
}
_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Invert: operator.invert,
    ast.Not: operator.not_,
}
_MAX_SIZE = 10**6


def _evaluate(node: ast.expr) -> Any:
    """Evaluate a literal arithmetic expression (`2+3` -> 5), as the official ``eval`` does.

    The official decoder calls ``eval`` on the expression; we evaluate literals
    only (no names, calls or attributes) and refuse results that would explode.
    """
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_evaluate(item) for item in node.elts]
        kind = {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)]
        return kind(items)
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {_evaluate(k): _evaluate(v) for k, v in zip(node.keys, node.values, strict=True)}
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left), _evaluate(node.right)
        _refuse_huge(node.op, left, right)
        try:
            return _BINARY[type(node.op)](left, right)
        except (ArithmeticError, TypeError, ValueError) as exc:
            raise DecodeError(f"cannot evaluate expression: {exc}") from None
    raise DecodeError(f"unsupported expression syntax {type(node).__name__}")


def _refuse_huge(op: ast.operator, left: Any, right: Any) -> None:
    huge = False
    if isinstance(op, (ast.Pow, ast.LShift)) and type(right) is int and type(left) is int:
        huge = right > 10_000 and abs(left) > 1
    elif isinstance(op, ast.Mult):
        for seq, count in ((left, right), (right, left)):
            if isinstance(seq, (str, bytes, list, tuple)) and type(count) is int:
                huge = huge or len(seq) * count > _MAX_SIZE
    if huge:
        raise DecodeError("expression result too large")


def decode_native(tool_calls: Sequence[Any] | None, name_map: Mapping[str, str] | None = None) -> list[Call]:
    """Decode OpenAI ``tool_calls`` as the official FC handlers do: ``json.loads`` the arguments.

    ``tool_calls`` items may be dicts (``{"function": {"name", "arguments"}}``) or
    SDK objects. ``None`` (a text reply) fails to decode, as officially.
    ``name_map`` maps the sanitised tool names back to the original ones.
    """
    if tool_calls is None:
        raise DecodeError("the reply has no tool calls")
    decoded = []
    for tool_call in tool_calls:
        function = _field(tool_call, "function", tool_call)
        name, arguments = _field(function, "name"), _field(function, "arguments")
        if not isinstance(name, str):
            raise DecodeError("tool call without a name")
        if isinstance(arguments, (str, bytes, bytearray)):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError as exc:
                raise DecodeError(f"tool call arguments are not JSON: {exc.msg}") from None
        decoded.append({(name_map or {}).get(name, name): arguments})
    if not is_call_list(decoded):
        raise DecodeError("tool call arguments are not a JSON object", wrong_format=True)
    return decoded


def _field(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)
