"""Multi-turn parity with bfcl-eval 2026.3.23's own evaluation.

Generated trajectories over all four multi-turn categories (see
``parity_mt_cases``) are judged by the official runner's decoding and
``multi_turn_checker`` (which ``eval``s the calls) and by ours (which parses
and dispatches them); validity and error type must agree on every one. The
entries we load (function docs, held-out docs) and the first prompt must equal
what the official loader and handler build.
"""

from __future__ import annotations

import copy
from collections import Counter

import pytest

from pytest_agenteval.tasks.bfcl._data import MULTI_TURN_CATEGORIES, find_data_dir
from pytest_agenteval.tasks.bfcl._mt_checker import check_multi_turn, decode_turns
from pytest_agenteval.tasks.bfcl._mt_data import MultiTurnEntry, load_multi_turn
from pytest_agenteval.tasks.bfcl._mt_env import missing_requirements
from pytest_agenteval.tasks.bfcl._prompt import native_tools, prompt_messages
from tests._oracle import require_oracle

from .official_checker import missing_official_requirements
from .parity_mt_cases import KINDS, generate_cases

_MISSING = missing_official_requirements() + missing_requirements()


@pytest.fixture(scope="module", autouse=True)
def _official_checker() -> None:
    if _MISSING:
        require_oracle(f"the official multi-turn checker is not installed: pip install {', '.join(_MISSING)}")


@pytest.fixture(scope="module")
def entries() -> list[MultiTurnEntry]:
    root = find_data_dir()
    return [entry for category in MULTI_TURN_CATEGORIES for entry in load_multi_turn(root, category)]


@pytest.fixture(scope="module")
def judged(entries):
    from .official_multi_turn import OfficialMultiTurnJudge

    official = OfficialMultiTurnJudge()
    verdicts = []
    for entry, case in generate_cases(entries, per_entry=2):
        theirs = official.judge(entry, case.turns, case.native)
        verdict = check_multi_turn(entry, decode_turns(case.turns, case.native))
        verdicts.append((entry, case, theirs, (verdict.valid, verdict.error_type)))
    return verdicts


def test_every_verdict_matches_the_official_multi_turn_checker(judged):
    differing = [(e.id, c.kind, c.native, theirs, ours) for e, c, theirs, ours in judged if theirs != ours]
    assert differing == []
    assert len(judged) >= 1_000
    assert {entry.category for entry, *_ in judged} == set(MULTI_TURN_CATEGORIES)
    assert {case.kind for _, case, *_ in judged} == set(KINDS)
    assert {case.native for _, case, *_ in judged} == {True, False}


def test_the_cases_exercise_every_official_error_type(judged):
    counts = Counter(theirs for _, _, theirs, _ in judged)
    assert {error for _, error in counts} == {
        None,
        "multi_turn:force_terminated",
        "multi_turn:empty_turn_model_response",
        "multi_turn:instance_state_mismatch",
        "multi_turn:execution_response_mismatch",
    }
    assert counts[(True, None)] >= 300  # enough passing trajectories to mean something


def test_entries_equal_what_the_official_loader_builds(entries):
    from .official_checker import OfficialJudge

    OfficialJudge()
    from bfcl_eval.utils import load_dataset_entry

    for category in MULTI_TURN_CATEGORIES:
        official = load_dataset_entry(category)
        ours = [e for e in entries if e.category == category]
        assert [o["id"] for o in official] == [e.id for e in ours]
        for theirs, entry in zip(official, ours, strict=True):
            raw_functions = [dict(doc) for doc in entry.functions]
            hinted = [{**doc, "description": doc["description"] + _HINT} for doc in raw_functions]
            assert theirs["function"] == hinted, entry.id
            missed = {int(k): v for k, v in (theirs.get("missed_function") or {}).items()}
            assert missed == entry.missed_functions, entry.id


_HINT = " Note that the provided function is in Python 3 syntax."


def test_first_prompts_and_tools_equal_the_official_ones(entries):
    from .official_checker import OfficialJudge

    OfficialJudge()
    from bfcl_eval.constants.enums import ModelStyle
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
    from bfcl_eval.model_handler import utils as handler_utils
    from bfcl_eval.utils import load_dataset_entry

    official = {e["id"]: e for c in MULTI_TURN_CATEGORIES for e in load_dataset_entry(c)}
    differing = []
    for entry in entries[::7]:
        raw = copy.deepcopy(official[entry.id])
        messages = handler_utils.system_prompt_pre_processing_chat_model(
            raw["question"][0], raw["function"], entry.id
        )
        tools = handler_utils.convert_to_tool(
            raw["function"], GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS
        )
        if messages != prompt_messages(entry) or tools != native_tools(entry.functions, "python"):
            differing.append(entry.id)
    assert differing == []


def test_execution_results_equal_the_official_executor(entries):
    """What the model is shown: our dispatcher's result strings equal the official
    ``eval``-based executor's, for the ground truth and for odd calls. (Python builtins
    such as ``print`` are the one known difference: the official ``eval`` runs them.)"""
    from .official_checker import OfficialJudge

    OfficialJudge()
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    from pytest_agenteval.tasks.bfcl._mt_decode import calls_from_text
    from pytest_agenteval.tasks.bfcl._mt_env import Environment

    from .parity_mt_cases import ODD_TEXT

    differing = []
    for number, entry in enumerate(entries[::5]):
        method = sorted(doc["name"] for doc in entry.functions)[number % len(entry.functions)]
        odd = []
        for text in ODD_TEXT:
            try:
                odd.extend(calls_from_text(text.format(m=method)))
            except ValueError:
                pass
        calls = [c for turn in entry.ground_truth for c in turn] + [c for c in odd if "print" not in c]
        ours = Environment(entry.involved_classes, entry.initial_config, entry.long_context).execute(calls)
        theirs, _ = multi_turn_utils.execute_multi_turn_func_call(
            calls, entry.initial_config, entry.involved_classes, "parity_exec", entry.id, entry.long_context
        )
        for name in [n for n in vars(multi_turn_utils) if n.startswith("parity_exec")]:
            del vars(multi_turn_utils)[name]
        differing.extend((entry.id, c, t, o) for c, t, o in zip(calls, theirs, ours, strict=True) if t != o)
    assert differing == []
