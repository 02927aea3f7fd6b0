"""BFCL (Berkeley Function Calling Leaderboard) scoring: data, decoding, checker, metrics.

A re-implementation of the official bfcl-eval 2026.3.23 AST checker that
never imports ``bfcl_eval`` (its imports pull in dozens of vendor SDKs); only
its data files are read.
"""

from pytest_agenteval.tasks.bfcl._checker import (
    ParamScore,
    Verdict,
    check_calls,
    check_entry,
    contains_call,
    is_empty_output,
    parameter_score,
    standardize,
)
from pytest_agenteval.tasks.bfcl._data import (
    CATEGORIES,
    BfclDataError,
    BfclEntry,
    category_language,
    category_markers,
    find_data_dir,
    load_bfcl,
)
from pytest_agenteval.tasks.bfcl._decode import DecodeError, decode_native, decode_strict, is_call_list
from pytest_agenteval.tasks.bfcl._lenient import decode_lenient, json_calls
from pytest_agenteval.tasks.bfcl._metrics import BfclItemResult, summarize_bfcl
from pytest_agenteval.tasks.bfcl._progressive import next_stage, progressive_stages
from pytest_agenteval.tasks.bfcl._prompt import (
    native_messages,
    native_tools,
    prompt_functions,
    prompt_messages,
    system_prompt,
    tool_name_map,
)
from pytest_agenteval.tasks.bfcl._score import BfclScore, score_text, score_tool_calls
from pytest_agenteval.tasks.bfcl._source_calls import MissingTreeSitterError, require_tree_sitter
from pytest_agenteval.tasks.bfcl.export import export_official_results, result_path

__all__ = [
    "CATEGORIES",
    "BfclDataError",
    "BfclEntry",
    "BfclItemResult",
    "BfclScore",
    "DecodeError",
    "MissingTreeSitterError",
    "ParamScore",
    "Verdict",
    "category_language",
    "category_markers",
    "check_calls",
    "check_entry",
    "contains_call",
    "decode_lenient",
    "decode_native",
    "decode_strict",
    "export_official_results",
    "find_data_dir",
    "is_call_list",
    "is_empty_output",
    "json_calls",
    "load_bfcl",
    "native_messages",
    "native_tools",
    "next_stage",
    "parameter_score",
    "progressive_stages",
    "prompt_functions",
    "prompt_messages",
    "require_tree_sitter",
    "result_path",
    "score_text",
    "score_tool_calls",
    "standardize",
    "summarize_bfcl",
    "system_prompt",
    "tool_name_map",
]
