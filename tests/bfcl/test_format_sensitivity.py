"""Format sensitivity against bfcl-eval 2026.3.23: the 5,200 (entry, configuration) items
and their prompts equal the official ones; replies rendered in every return format (with
and without the tool-call tag, and broken) get the official verdict; the spread statistics
follow ``format_sensitivity_runner``."""

from __future__ import annotations

import copy
import html
import json

import pytest

from pytest_agenteval.tasks.bfcl._data import find_data_dir
from pytest_agenteval.tasks.bfcl._format_sensitivity import (
    configurations,
    format_messages,
    load_format_sensitivity,
    score_format,
    spread,
)
from tests._oracle import require_oracle

from .official_checker import PROMPT_MODEL, OfficialJudge, missing_official_requirements

_MISSING = missing_official_requirements()


@pytest.fixture(scope="module", autouse=True)
def _official_checker() -> None:
    if _MISSING:
        require_oracle(f"the official checker is not installed: pip install {', '.join(_MISSING)}")


_TYPES = {str: "string", int: "integer", float: "float", bool: "boolean", list: "array", dict: "dict"}


@pytest.fixture(scope="module")
def entries():
    return load_format_sensitivity(find_data_dir())


@pytest.fixture(scope="module")
def official():
    return OfficialJudge()


def _oracle(entry) -> list[tuple[str, dict]]:
    calls = []
    for call in entry.ground_truth:
        ((name, params),) = call.items()
        calls.append(
            (name, {k: next(x for x in v if x != "") for k, v in params.items() if any(x != "" for x in v)})
        )
    return calls


def render(calls: list[tuple[str, dict]], return_format: str) -> str:
    if return_format == "python":
        return (
            "[" + ", ".join(f"{n}({', '.join(f'{k}={v!r}' for k, v in a.items())})" for n, a in calls) + "]"
        )
    if return_format == "json":
        return json.dumps([{"function": n, "parameters": a} for n, a in calls])

    def value(v):
        return html.escape(v if isinstance(v, str) else repr(v), quote=True)

    if return_format == "verbose_xml":
        params = lambda a: "".join(  # noqa: E731
            f'<param name="{k}" value="{value(v)}" type="{_TYPES.get(type(v), "string")}"/>'
            for k, v in a.items()
        )
        body = "".join(f'<function name="{n}"><params>{params(a)}</params></function>' for n, a in calls)
    else:
        params = lambda a: "".join(  # noqa: E731
            f'<param name="{k}" type="{_TYPES.get(type(v), "string")}">{value(v)}</param>'
            for k, v in a.items()
        )
        body = "".join(f'<function name="{n}">{params(a)}</function>' for n, a in calls)
    return f"<functions>{body}</functions>"


def _replies(entry) -> list[str]:
    text = render(_oracle(entry), entry.return_format)
    other = "json" if entry.return_format != "json" else "python"
    replies = [
        text,
        f"<TOOLCALL>{text}</TOOLCALL>",
        render(_oracle(entry), other),
        "I cannot help.",
        text[:-3],
    ]
    if entry.ground_truth:
        name, args = _oracle(entry)[0]
        replies.append(render([(name, {**args, "unexpected": 1})], entry.return_format))
    return replies


def _official(official, entry, reply) -> tuple[bool, str | None]:
    from bfcl_eval.constants.enums import Language, ReturnFormat
    from bfcl_eval.model_handler.utils import default_decode_ast_prompting

    try:
        decoded = default_decode_ast_prompting(reply, ReturnFormat(entry.return_format), entry.tool_call_tag)
    except Exception:  # noqa: BLE001
        return False, "ast_decoder:decoder_failed"
    if not official.utils.is_function_calling_format_output(decoded):
        return False, "ast_decoder:decoder_wrong_output_format"
    result = official.ast_checker(
        entry.base.functions,
        decoded,
        entry.ground_truth,
        Language.PYTHON,
        entry.id.split(":")[-1],
        PROMPT_MODEL,
    )
    return bool(result["valid"]), None if result["valid"] else result["error_type"]


def test_items_and_prompts_equal_the_official_ones(entries, official):
    from bfcl_eval.model_handler.utils import system_prompt_pre_processing_chat_model

    theirs = official.utils.load_dataset_entry("format_sensitivity")
    assert [e["id"] for e in theirs] == [e.id for e in entries] and len(entries) == 200 * 26
    for raw, entry in list(zip(theirs, entries, strict=True))[::13]:
        expected = system_prompt_pre_processing_chat_model(
            copy.deepcopy(raw["question"][0]), raw["function"], raw["id"]
        )
        assert format_messages(entry) == expected, entry.id


def test_verdicts_equal_the_official_ones_in_every_format(entries, official):
    judged = [(e, r) for e in entries[::3] for r in _replies(e)]
    differing = []
    for entry, reply in judged:
        fields = score_format(entry, reply).fields
        ours = (fields["valid"], fields["error_type"] if not fields["valid"] else None)
        if ours != _official(official, entry, reply):
            differing.append((entry.id, reply[:120], ours))
    assert differing == []
    valid = sum(score_format(e, r).correct for e, r in judged)
    assert len(judged) > 9_000 and 1_000 < valid < len(judged) - 3_000


def test_there_are_26_configurations():
    configs = configurations()
    assert len(configs) == len(set(configs)) == 26


def test_spread_is_the_official_max_delta_variance_and_std():
    verdicts = [("a", True), ("a", True), ("b", True), ("b", False), ("c", False), ("c", False)]
    assert spread(verdicts) == {
        "accuracy_max_delta": 100.0,
        "accuracy_variance": 2500.0,
        "accuracy_std": 50.0,
        "configs": {
            "a": {"accuracy": 1.0, "correct": 2, "total": 2},
            "b": {"accuracy": 0.5, "correct": 1, "total": 2},
            "c": {"accuracy": 0.0, "correct": 0, "total": 2},
        },
    }
    assert spread([("a", True)])["accuracy_std"] == 0.0
