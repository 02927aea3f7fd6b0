"""The official executable environments of BFCL multi-turn, driven without ``eval``.

bfcl-eval's ``execute_multi_turn_func_call`` prefixes every method name in a
call string with a global instance name and ``eval``s the result. We keep its
instances (bfcl-eval's own classes, imported as a library, configured with the
entry's initial state) and its result formatting, but parse each call string
with ``ast`` and dispatch it to the bound method: arguments are literals, or
nested calls dispatched the same way; nothing the model wrote is executed.
"""

from __future__ import annotations

import ast
import copy
import importlib
import importlib.util
import inspect
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_agenteval.tasks.bfcl._decode import _evaluate as evaluate_literal

_MODULES = "bfcl_eval.eval_checker.multi_turn_eval.func_source_code"
# bfcl-eval's CLASS_FILE_PATH_MAPPING and STATELESS_CLASSES.
CLASS_MODULES: dict[str, str] = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
    "WebSearchAPI": "web_search",
    "MemoryAPI_kv": "memory_kv",
    "MemoryAPI_vector": "memory_vector",
    "MemoryAPI_rec_sum": "memory_rec_sum",
}
STATELESS_CLASSES = frozenset({"MathAPI"})
# The official guard: these method names are refused before anything runs.
FORBIDDEN = frozenset({"kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run"})
_REQUIREMENTS = {"bfcl_eval": "bfcl-eval (--no-deps)", "mpmath": "mpmath"}
# What importing each backend needs beyond that (bfcl-eval is installed without its deps).
_MEMORY = {"overrides": "overrides", "filelock": "filelock"}
CLASS_REQUIREMENTS: dict[str, dict[str, str]] = {
    "MemoryAPI_kv": {**_MEMORY, "rank_bm25": "rank-bm25"},
    "MemoryAPI_rec_sum": _MEMORY,
    "MemoryAPI_vector": {**_MEMORY, "sentence_transformers": "sentence-transformers", "faiss": "faiss-cpu"},
    "WebSearchAPI": {
        "requests": "requests",
        "bs4": "beautifulsoup4",
        "html2text": "html2text",
        "serpapi": "google-search-results",
    },
}


class EnvironmentUnavailable(Exception):
    """bfcl-eval's environment classes cannot be imported; the message names the fix."""


def missing_requirements(class_name: str | None = None) -> list[str]:
    """pip requirements the multi-turn environments (or ``class_name``) still need."""
    needed = {**_REQUIREMENTS, **CLASS_REQUIREMENTS.get(class_name or "", {})}
    return [req for module, req in needed.items() if importlib.util.find_spec(module) is None]


def environment_class(class_name: str) -> type:
    module = CLASS_MODULES.get(class_name)
    if module is None:
        raise EnvironmentUnavailable(f"unknown BFCL environment class {class_name!r}")
    if "BFCL_PROJECT_ROOT" not in os.environ:
        # The memory classes import bfcl-eval's config, which creates result folders under
        # this root at import (by default inside site-packages): point it at a scratch folder.
        os.environ["BFCL_PROJECT_ROOT"] = tempfile.mkdtemp(prefix="agenteval-bfcl-")
    try:
        return getattr(importlib.import_module(f"{_MODULES}.{module}"), class_name)
    except ImportError as exc:
        raise EnvironmentUnavailable(
            f"BFCL multi-turn needs bfcl-eval's environment {class_name} ({exc}): "
            "pip install --no-deps bfcl-eval==2026.3.23, and mpmath"
        ) from None


def use_search_backend(url: str) -> None:
    """Send bfcl-eval's web search tool to ``url``: its SerpAPI client with another base URL
    (``https://serpapi.com`` is the official one). The tool itself, its parameters and
    its shaping of the results stay the official ones."""
    module = importlib.import_module(f"{_MODULES}.web_search")
    backend = url.rstrip("/")
    if getattr(module.GoogleSearch, "BACKEND", None) != backend:
        client = importlib.import_module("serpapi").GoogleSearch
        module.GoogleSearch = type("ConfiguredSearch", (client,), {"BACKEND": backend})


class CallError(Exception):
    """A call string that cannot be dispatched (the official ``eval`` would raise too)."""


class Environment:
    """Fresh instances of an entry's classes, persisting across its turns and steps."""

    def __init__(
        self,
        involved_classes: Sequence[str],
        initial_config: Mapping[str, Any],
        long_context: bool = False,
    ) -> None:
        self.instances: dict[str, Any] = {}
        self.methods: dict[str, Any] = {}
        for class_name in involved_classes:
            instance = environment_class(class_name)()
            if class_name not in STATELESS_CLASSES:
                config = copy.deepcopy(initial_config.get(class_name, {}))
                instance._load_scenario(config, long_context=long_context)
            self.instances[class_name] = instance
            # A later class wins a shared method name, as in the official mapping.
            for name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not name.startswith("_"):
                    self.methods[name] = method

    def execute(self, calls: Sequence[str]) -> list[str]:
        """Run each call string; the results are the official strings (errors included)."""
        return [self.execute_one(call) for call in calls]

    def execute_one(self, call: str) -> str:
        try:
            _refuse_forbidden(call)
            result = self._call(_parse(call))
        except Exception as exc:  # noqa: BLE001 - the official runner reports every error
            return f"Error during execution: {exc}"
        return format_result(result)

    def _call(self, node: ast.Call) -> Any:
        method = self._resolve(node.func)
        args = [self._value(arg) for arg in node.args]
        kwargs = {}
        for keyword in node.keywords:
            if keyword.arg is None:
                raise CallError("argument unpacking is not supported")
            kwargs[keyword.arg] = self._value(keyword.value)
        return method(*args, **kwargs)

    def _resolve(self, func: ast.expr) -> Any:
        if isinstance(func, ast.Name):
            if func.id in self.methods:
                return self.methods[func.id]
            raise NameError(f"name '{func.id}' is not defined")
        root = func
        while isinstance(root, (ast.Attribute, ast.Call, ast.Subscript)):
            root = root.func if isinstance(root, ast.Call) else root.value
        if isinstance(root, ast.Name):
            raise NameError(f"name '{root.id}' is not defined")
        raise CallError(f"cannot call {ast.unparse(func)}")

    def _value(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = [self._value(item) for item in node.elts]
            return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](items)
        if isinstance(node, ast.Dict):
            if any(key is None for key in node.keys):
                raise CallError("dict unpacking is not supported")
            return {self._value(k): self._value(v) for k, v in zip(node.keys, node.values, strict=True)}
        if isinstance(node, ast.Name):
            # The official rewrite prefixes names followed by `(` only: a bare name is unknown.
            raise NameError(f"name '{node.id}' is not defined")
        if isinstance(node, (ast.BinOp, ast.UnaryOp)):
            return evaluate_literal(node)
        return ast.literal_eval(node)


def _parse(call: str) -> ast.Call:
    # ``filename="<string>"``: syntax errors read as the official ``eval``'s do.
    tree = ast.parse(call, filename="<string>", mode="eval")
    if not isinstance(tree.body, ast.Call):
        raise CallError(f"not a function call: {call}")
    return tree.body


def _refuse_forbidden(call: str) -> None:
    """The official guard, on the text before the first ``(`` (the part after a dot)."""
    name = call.split("(")[0]
    if "." in name:
        name = name.split(".")[1]
    if name in FORBIDDEN:
        raise CallError(f"Function call {name} is not allowed.")


def format_result(result: Any) -> str:
    """The official result string: str as is, dict as JSON (else str), anything else str()."""
    if type(result) is str:
        return result
    if type(result) is dict:
        try:
            return json.dumps(result)
        except Exception:  # noqa: BLE001 - the official fallback for unserialisable values
            return str(result)
    return str(result)


def public_state(instance: Any) -> dict[str, Any]:
    """An instance's compared state: its attributes not starting with ``_``."""
    return {key: value for key, value in vars(instance).items() if not key.startswith("_")}
