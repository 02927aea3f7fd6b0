"""BFCL v4 format sensitivity: 200 single-turn entries asked under each of the 26 official
prompt-format configurations (return format, tool-call tag, function-doc format, prompt
format, style), scored with the AST checker, reported as the accuracy spread across
configurations (``format_sensitivity_runner``: max delta, variance and std, in points).

The system prompts are bfcl-eval's own (``formulate_system_prompt``, imported as a library);
replies in the Python format go through our official-semantics decoder, JSON and XML
replies through bfcl-eval's parsers (they ``json.loads`` / ``ast.literal_eval``, never
``eval``). Prompting style only: the configurations are prompt formats.
"""

from __future__ import annotations

import copy
import json
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agenteval.api.records import Score
from pytest_agenteval.tasks.bfcl._checker import check_entry, contains_call, parameter_score
from pytest_agenteval.tasks.bfcl._data import BfclEntry, load_bfcl
from pytest_agenteval.tasks.bfcl._decode import DecodeError, decode_python_calls, is_call_list
from pytest_agenteval.tasks.bfcl._prompt import prompt_functions

CATEGORY = "format_sensitivity"
_FORMATS = ("python", "json", "verbose_xml", "concise_xml")


def configurations() -> list[str]:
    """``get_all_format_sensitivity_configs``: 4 x 2 x 3 combinations, then markdown and
    experimental variants of the default."""
    configs = [
        f"ret_fmt={ret}&tool_call_tag={tag}&func_doc_fmt={doc}&prompt_fmt=plaintext&style=classic"
        for ret in _FORMATS
        for tag in ("True", "False")
        for doc in ("python", "xml", "json")
    ]
    configs.append("ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=markdown&style=classic")
    configs.append(
        "ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=experimental"
    )
    return configs


@dataclass(frozen=True)
class FormatEntry:
    """One (entry, configuration) pair: id ``format_sensitivity_<n>:<config>:<entry id>``."""

    id: str
    config: str
    base: BfclEntry
    category: str = CATEGORY
    language: str = "python"

    @property
    def question(self) -> list[list[dict[str, Any]]]:
        return self.base.question

    @property
    def ground_truth(self) -> Any:
        return self.base.ground_truth

    @property
    def return_format(self) -> str:
        return self.config.split("&")[0].removeprefix("ret_fmt=")

    @property
    def tool_call_tag(self) -> bool:
        return "tool_call_tag=True" in self.config


def load_format_sensitivity(root: Path) -> list[FormatEntry]:
    ids: dict[str, list[str]] = json.loads((root / "BFCL_v4_format_sensitivity.json").read_text())
    entries: list[BfclEntry] = []
    for category, wanted in ids.items():
        if wanted:
            chosen = set(wanted)
            entries.extend(e for e in load_bfcl([category], root) if e.id in chosen)
    configs = configurations()
    pairs = [(entry, config) for entry in entries for config in configs]
    return [
        FormatEntry(f"{CATEGORY}_{n}:{config}:{entry.id}", config, entry)
        for n, (entry, config) in enumerate(pairs)
    ]


def format_messages(entry: FormatEntry) -> list[dict[str, Any]]:
    """The official prompt: this configuration's system prompt, then the question. The docs
    get the Python hint twice, as the official loader gives them."""
    from bfcl_eval.model_handler.utils import system_prompt_pre_processing_chat_model

    functions = prompt_functions(prompt_functions(entry.base.functions, entry.base.language), "python")
    return system_prompt_pre_processing_chat_model(copy.deepcopy(entry.question[0]), functions, entry.id)


def decode_format(text: str, entry: FormatEntry) -> list[dict[str, Any]]:
    """``default_decode_ast_prompting`` with the configuration's return format and tag."""
    body = text.strip("`\n ")
    body = body if body.startswith("[") else "[" + body
    body = body if body.endswith("]") else body + "]"
    if entry.tool_call_tag:
        match = re.search(r"<TOOLCALL>(.*?)</TOOLCALL>", body, re.DOTALL)
        if not match:
            raise DecodeError("no <TOOLCALL> tag")
        body = match.group(1).strip()
    try:
        decoded = _parse(body, entry.return_format)
    except DecodeError:
        raise
    except Exception as exc:  # noqa: BLE001 - the official parsers raise anything; a decode failure
        raise DecodeError(f"invalid {entry.return_format} calls: {exc}") from None
    if not is_call_list(decoded):
        raise DecodeError("not in the function-call format", wrong_format=True)
    return decoded


def _parse(body: str, return_format: str) -> Any:
    if return_format == "python":
        return decode_python_calls(body)
    if return_format == "json":
        from bfcl_eval.model_handler.parser.json_parser import parse_json_function_call

        match = re.search(r"\[.*\]", body, re.DOTALL)
        return parse_json_function_call(match.group(0) if match else body)
    from bfcl_eval.model_handler.parser import xml_parser

    match = re.search(r"<functions>(.*?)</functions>", body, re.DOTALL)
    if not match:
        raise DecodeError("no <functions> tag")
    if return_format == "verbose_xml":
        return xml_parser.parse_verbose_xml_function_call(match.group(0))
    return xml_parser.parse_concise_xml_function_call(match.group(0))


def spread(verdicts: Iterable[tuple[str, bool]]) -> dict[str, Any]:
    """Per-configuration accuracy and the official spread statistics (in points, 2 decimals)."""
    table: dict[str, list[bool]] = {}
    for config, valid in verdicts:
        table.setdefault(config, []).append(valid)
    by_config = {
        c: {"accuracy": sum(v) / len(v), "correct": sum(v), "total": len(v)} for c, v in table.items()
    }
    accuracies: Sequence[float] = [row["accuracy"] for row in by_config.values()]
    if len(accuracies) > 1:
        variance = round(statistics.variance(accuracies) * 100**2, 2)
        std = round(statistics.stdev(accuracies) * 100, 2)
        delta = round((max(accuracies) - min(accuracies)) * 100, 2)
    else:
        variance = std = delta = 0.0
    return {
        "accuracy_max_delta": delta,
        "accuracy_variance": variance,
        "accuracy_std": std,
        "configs": by_config,
    }


def score_format(entry: FormatEntry, text: str) -> Score:
    """The official verdict on one reply under the entry's configuration."""
    try:
        decoded, error = decode_format(text, entry), None
    except DecodeError as exc:
        decoded, error = None, exc
    verdict = check_entry(entry.base, decoded, error)
    params = parameter_score(entry.base, decoded)
    return Score(
        correct=verdict.valid,
        formatted=decoded is not None,
        answer=None,
        fields={
            "valid": verdict.valid,
            "lenient_valid": verdict.valid,  # the configuration fixes the format
            "error_type": verdict.error_type,
            "decode_error": str(error) if error else None,
            "predicted_call": contains_call(decoded, error),
            "expected_call": True,
            "params_total": params.total,
            "params_correct": params.correct,
            "decoded": decoded,
            "format_config": entry.config,
        },
    )
