"""Parity with the official bfcl-eval 2026.3.23 decoder and checker.

Tens of thousands of generated outputs (see ``parity_cases``) are judged by the
official code and by ours; every verdict must agree: ``valid``, and the
``error_type`` of invalid ones. The prompts and tools we build must equal the
official ones for every entry.
"""

from __future__ import annotations

import copy
from collections import Counter

import pytest

from pytest_agenteval.tasks.bfcl import (
    CATEGORIES,
    BfclEntry,
    load_bfcl,
    native_tools,
    prompt_messages,
    score_text,
    score_tool_calls,
)
from tests._oracle import require_oracle

from .official_checker import OfficialJudge, missing_official_requirements
from .parity_cases import Case, generate_cases

_MISSING = missing_official_requirements()


@pytest.fixture(scope="module", autouse=True)
def _official_checker() -> None:
    if _MISSING:
        require_oracle(f"the official checker is not installed: pip install {', '.join(_MISSING)}")


@pytest.fixture(scope="module")
def official() -> OfficialJudge:
    return OfficialJudge()


@pytest.fixture(scope="module")
def entries() -> list[BfclEntry]:
    return load_bfcl(CATEGORIES)


def _ours(entry: BfclEntry, case: Case) -> tuple[bool, str | None]:
    # Through the same entry points the plugin uses (strict verdict; lenient computed too).
    if case.native:
        verdict = score_tool_calls(entry, case.output).verdict
    else:
        verdict = score_text(entry, case.output).verdict
    return verdict.valid, verdict.error_type


def _report(disagreements: list[tuple[BfclEntry, Case, tuple, tuple]]) -> str:
    lines = [f"{len(disagreements)} verdicts differ from the official checker; first ones:"]
    for entry, case, theirs, ours in disagreements[:15]:
        output = repr(case.output)
        lines.append(
            f"  {entry.id} [{case.kind}] {output[:160]}{'...' if len(output) > 160 else ''}\n"
            f"      official={theirs} ours={ours}"
        )
    return "\n".join(lines)


@pytest.fixture(scope="module")
def judged(official, entries) -> list[tuple[BfclEntry, Case, tuple, tuple]]:
    """Every generated case with the official verdict and ours."""
    by_id = {entry.id: entry for entry in entries}
    verdicts = []
    for case in generate_cases(entries):
        entry = by_id[case.entry_id]
        verdicts.append((entry, case, official.judge(entry, case.output, case.native), _ours(entry, case)))
    return verdicts


def _comparable(verdict: tuple[bool, str | None]) -> tuple[bool, str | None]:
    # The error type only matters for invalid verdicts.
    return verdict if not verdict[0] else (True, None)


def test_every_verdict_matches_the_official_checker(judged):
    disagreements = [v for v in judged if _comparable(v[2]) != _comparable(v[3])]
    assert not disagreements, _report(disagreements)
    assert len(judged) >= 10_000
    assert {entry.category for entry, *_ in judged} == set(CATEGORIES)


def test_the_case_set_is_deterministic(entries):
    sample = [e for e in entries if e.id.endswith(("_0", "_7", "-0-0"))]
    assert generate_cases(sample) == generate_cases(sample)


def test_the_case_set_exercises_every_official_error_type(judged):
    error_types = Counter(theirs[1] for _, _, theirs, _ in judged)
    expected = {
        None,
        "ast_decoder:decoder_failed",
        "ast_decoder:decoder_wrong_output_format",
        "simple_function_checker:wrong_count",
        "simple_function_checker:wrong_func_name",
        "simple_function_checker:missing_required",
        "simple_function_checker:unexpected_param",
        "simple_function_checker:missing_optional",
        "multiple_function_checker:wrong_count",
        "parallel_function_checker_no_order:wrong_count",
        "parallel_function_checker_no_order:cannot_find_match",
        "type_error:simple",
        "type_error:nested",
        "type_error:java",
        "type_error:js",
        "value_error:string",
        "value_error:others",
        "value_error:list/tuple",
        "value_error:dict_key",
        "value_error:dict_value",
        "value_error:list_dict_count",
        "irrelevance_error:decoder_success",
        "relevance_error:decoder_failed",
    }
    assert expected <= set(error_types)


def test_prompts_and_tools_equal_the_official_ones(official, entries):
    from bfcl_eval.constants.enums import ModelStyle
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
    from bfcl_eval.model_handler import utils as handler_utils

    differing = []
    for entry in entries:
        raw = {"id": entry.id, "question": copy.deepcopy(entry.question)}
        raw["function"] = copy.deepcopy(entry.functions)
        (raw,) = official.utils.add_language_specific_hint_to_function_doc([raw])
        messages = handler_utils.system_prompt_pre_processing_chat_model(
            raw["question"][0], raw["function"], entry.id
        )
        tools = handler_utils.convert_to_tool(
            raw["function"], GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS
        )
        if messages != prompt_messages(entry) or tools != native_tools(entry.functions, entry.language):
            differing.append(entry.id)
    assert differing == []
