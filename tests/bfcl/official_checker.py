"""bfcl-eval's own decoder and checker, importable without its vendor SDKs.

``ast_checker.py`` imports the model registry, which imports every model
handler and so every vendor SDK; the checker only reads the registry's
``underscore_to_dot`` flag, so a stub registry is installed first. The runner
steps around the checker (decoding, format check, relevance) are short and
are replicated here, calling the official helpers.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
import types
from typing import Any

from pytest_agenteval.tasks.bfcl import BfclEntry

PROMPT_MODEL = "parity-prompt-model"
FC_MODEL = "parity-fc-model"  # a function-calling model: dots in names become underscores

# What importing the official decoder and checker needs: module -> pip requirement.
OFFICIAL_REQUIREMENTS = {
    "bfcl_eval": "bfcl-eval==2026.3.23 (with --no-deps)",
    "tree_sitter": "tree-sitter==0.21.3",
    "tree_sitter_java": "tree-sitter-java==0.21.0",
    "tree_sitter_javascript": "tree-sitter-javascript==0.21.4",
    "filelock": "filelock",
    "tenacity": "tenacity",
}


def missing_official_requirements() -> list[str]:
    """pip requirements still missing for ``OfficialJudge``."""
    return [
        requirement
        for module, requirement in OFFICIAL_REQUIREMENTS.items()
        if importlib.util.find_spec(module) is None
    ]


class OfficialJudge:
    """bfcl-eval's decoder and checker, with the runner's decode and relevance steps."""

    _root: tempfile.TemporaryDirectory[str] | None = None

    def __init__(self) -> None:
        if "BFCL_PROJECT_ROOT" not in os.environ:  # bfcl-eval makes folders there on import
            OfficialJudge._root = tempfile.TemporaryDirectory(prefix="bfcl_parity_")  # removed at exit
            os.environ["BFCL_PROJECT_ROOT"] = OfficialJudge._root.name
        registry = types.ModuleType("bfcl_eval.constants.model_config")
        registry.MODEL_CONFIG_MAPPING = _StubRegistry()
        sys.modules["bfcl_eval.constants.model_config"] = registry
        from bfcl_eval import utils
        from bfcl_eval.constants.enums import Language, ReturnFormat
        from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
        from bfcl_eval.model_handler.utils import default_decode_ast_prompting

        self.utils, self.ast_checker = utils, ast_checker
        self.decode_prompting = default_decode_ast_prompting
        self.Language, self.ReturnFormat = Language, ReturnFormat

    def decode(self, output: Any, native: bool, return_format: Any) -> Any:
        if not native:
            return self.decode_prompting(output, return_format, False)
        # OpenAI FC handlers: the result is [{name: arguments}] or the reply text.
        result = output
        if result is not None:
            result = [{c["function"]["name"]: c["function"]["arguments"]} for c in result]
        decoded = []
        for invoked in result if result is not None else "no tool call":
            name = list(invoked.keys())[0]
            decoded.append({name: json.loads(invoked[name])})
        return decoded

    def judge(self, entry: BfclEntry, output: Any, native: bool = False) -> tuple[bool, str | None]:
        """(valid, error_type) as ``eval_runner`` would record them.

        ``output`` is the raw text, or (``native``) OpenAI tool calls or ``None``.
        """
        utils = self.utils
        if utils.is_relevance_or_irrelevance(entry.category):
            try:
                decoded = self.decode(output, native, self.ReturnFormat.PYTHON)
                has_call = not utils.is_empty_output(decoded)
            except Exception:
                has_call = False
            if "irrelevance" in entry.category:
                return (True, None) if not has_call else (False, "irrelevance_error:decoder_success")
            return (True, None) if has_call else (False, "relevance_error:decoder_failed")
        if utils.is_java(entry.category):
            language, return_format = self.Language.JAVA, self.ReturnFormat.JAVA
        elif utils.is_js(entry.category):
            language, return_format = self.Language.JAVASCRIPT, self.ReturnFormat.JAVASCRIPT
        else:
            language, return_format = self.Language.PYTHON, self.ReturnFormat.PYTHON
        try:
            decoded = self.decode(output, native, return_format)
        except Exception:
            return False, "ast_decoder:decoder_failed"
        if not utils.is_function_calling_format_output(decoded):
            return False, "ast_decoder:decoder_wrong_output_format"
        model = FC_MODEL if native else PROMPT_MODEL
        result = self.ast_checker(
            entry.functions, decoded, entry.ground_truth, language, entry.category, model
        )
        return bool(result["valid"]), None if result["valid"] else result["error_type"]


class _StubConfig:
    def __init__(self, underscore_to_dot: bool) -> None:
        self.underscore_to_dot = underscore_to_dot


class _StubRegistry(dict):
    def __missing__(self, key: str) -> _StubConfig:
        # The checker looks models up with "_" turned into "/".
        return _StubConfig(underscore_to_dot=key == FC_MODEL.replace("_", "/"))
