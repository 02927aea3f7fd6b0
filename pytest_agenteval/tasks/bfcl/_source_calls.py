"""Java and JavaScript call decoding with tree-sitter, as the official runner does.

The official decoder (``model_handler/parser/{java,js}_parser.py``) parses the
model output with tree-sitter 0.21 and keeps argument values as source text;
the checker converts them later with the language's type rules
(``_source_types``). We walk the same syntax trees the same way so that the
verdicts agree, quirks included (they are noted where they matter).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

_INSTALL_HINT = (
    "BFCL java/javascript decoding needs tree-sitter: pip install tree-sitter==0.21.3 "
    "tree-sitter-java==0.21.0 tree-sitter-javascript==0.21.4 (extra 'pytest-agenteval[bfcl]')"
)


class MissingTreeSitterError(ImportError):
    """tree-sitter or a grammar package is not installed."""


class SourceParseError(ValueError):
    """The official parser would raise on this source text."""


@lru_cache(maxsize=2)
def _parser(language: str) -> Any:
    try:
        import tree_sitter

        grammar = __import__("tree_sitter_java" if language == "java" else "tree_sitter_javascript")
    except ImportError:
        raise MissingTreeSitterError(_INSTALL_HINT) from None
    parser = tree_sitter.Parser()
    parser.set_language(tree_sitter.Language(grammar.language(), language))
    return parser


def require_tree_sitter() -> None:
    """Raise ``MissingTreeSitterError`` (one line, with the fix) unless both grammars load."""
    _parser("java")
    _parser("javascript")


def decode_source_calls(source: str, language: str) -> object:
    """The official parser's raw result: a call list, or ``{}``/``None`` when no call is found."""
    root = _parser(language).parse(source.encode("utf-8")).root_node
    # The official check: any ERROR node anywhere fails the decode.
    if "ERROR" in root.sexp():
        raise SourceParseError(f"{language} syntax error")
    if language == "java":
        return _JavaWalker(source).first_call(root) or {}
    return _first_js_call(root)


class _JavaWalker:
    def __init__(self, source: str) -> None:
        self.source = source

    def text(self, node: Any) -> str:
        # Official quirk: byte offsets slice the *str*, garbling text after non-ASCII.
        return self.source[node.start_byte : node.end_byte]

    def first_call(self, node: Any) -> list[dict[str, dict[Any, Any]]] | None:
        """Depth-first: the first method invocation found is the only call decoded."""
        if node.type == "method_invocation":
            name, target = node.child_by_field_name("name"), node.child_by_field_name("object")
            arguments = node.child_by_field_name("arguments")
            if name is None:
                raise SourceParseError("java call without a name")
            if arguments is None:
                return None  # officially not searched further
            func = f"{self.text(target)}.{self.text(name)}" if target else self.text(name)
            return [{func: self.arguments(arguments)}]
        for child in node.children:
            found = self.first_call(child)
            if found:
                return found
        return None

    def arguments(self, node: Any) -> dict[Any, Any]:
        arguments: dict[Any, Any] = {}
        for child in node.children:
            if child.type == "assignment_expression":
                # `name=value`; any assignment operator (`+=`) counts the same.
                key, value = self.text(child.children[0]), self.value(child.children[2])
            elif child.type in ("identifier", "class_literal"):
                key, value = None, self.value(child)  # positional names and literals
            else:
                continue  # other positional arguments are dropped
            if key in arguments:
                raise SourceParseError("multiple arguments with the same name")
            arguments[key] = value
        return arguments

    def value(self, node: Any, nested: bool = False) -> str:
        """Source text of a value; top-level string and char literals lose their quotes."""
        if node is None:
            raise SourceParseError("incomplete java expression")
        kind = node.type
        if kind in ("string_literal", "character_literal"):
            text = self.text(node)
            return text if nested else text[1:-1]
        if kind in ("identifier", "class_literal", "type_identifier", "method_invocation"):
            return self.text(node)
        if kind == "array_creation_expression":
            element_type = self.value(node.child_by_field_name("type"), True)
            return f"new {element_type}[]{self.value(node.child_by_field_name('value'), True)}"
        if kind == "object_creation_expression":
            return self._object_creation(node)
        if node.child_count > 0:
            # Children are concatenated without the whitespace between them.
            return "".join(self.value(child, True) for child in node.children)
        return self.text(node)

    def _object_creation(self, node: Any) -> str:
        # Official quirk: an anonymous class body (`{{ put(...); }}`) is dropped.
        type_text = self.value(node.child_by_field_name("type"), True)
        arguments = node.child_by_field_name("arguments")
        if arguments is None:
            return f"new {type_text}()"
        parts = [self.value(c, True) for c in arguments.children if c.type not in (",", "(", ")")]
        return f"new {type_text}({', '.join(parts)})"


def _first_js_call(root: Any) -> list[dict[str, dict[Any, Any]]] | None:
    """The first call that is a whole top-level expression statement, else ``None``."""
    if root.type != "program":
        return None
    for statement in root.children:
        if statement.type != "expression_statement":
            continue
        for expression in statement.children:
            if expression.type == "call_expression":
                name = expression.children[0].text.decode("utf-8")
                return [{name: _js_arguments(expression.children[1])}]
    return None


def _js_arguments(node: Any) -> dict[Any, Any]:
    arguments: dict[Any, Any] = {}
    for child in node.children:
        if child.type == "assignment_expression":
            key = child.children[0].text.decode("utf-8")
            value = child.children[2].text.decode("utf-8")
            if value[:1] == value[-1:] and value[:1] in ("'", '"'):
                value = value[1:-1]
        elif child.type in ("identifier", "true"):  # official: `false` is not listed
            key, value = None, child.text.decode("utf-8")
        else:
            continue
        if key in arguments:
            raise SourceParseError("multiple arguments with the same name")
        arguments[key] = value
    return arguments
