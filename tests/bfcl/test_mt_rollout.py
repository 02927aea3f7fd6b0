"""The multi-turn rollout against the OpenAI test server (real sockets, a scripted model):
what is sent each step, what is executed, how turns end, the step limit, held-out functions."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from pytest_agenteval.models import FatalRequestError, OpenAISampler, SamplingParams
from pytest_agenteval.tasks.bfcl._data import find_data_dir
from pytest_agenteval.tasks.bfcl._mt_data import load_multi_turn
from pytest_agenteval.tasks.bfcl._mt_env import missing_requirements
from pytest_agenteval.tasks.bfcl._mt_rollout import (
    ADDED_FUNCTIONS_FC,
    MAXIMUM_STEP_LIMIT,
    play_multi_turn,
    stored_result,
)
from pytest_agenteval.tasks.bfcl._mt_score import score_multi_turn
from pytest_agenteval.tasks.bfcl._prompt import prompt_messages
from pytest_agenteval.testing import OpenAITestServer, Reply, ServerConfig, estimate_tokens
from pytest_agenteval.testing._overflow import CONTEXT_STYLES
from pytest_agenteval.testing._render import estimate_prompt_tokens
from tests._oracle import require_oracle

from .mt_script import DONE, GroundTruthModel


@pytest.fixture(scope="module", autouse=True)
def _bfcl_eval_environments() -> None:
    if missing_requirements():
        require_oracle(
            f"bfcl-eval's environments are not installed: pip install {' '.join(missing_requirements())}"
        )


PARAMS = SamplingParams(temperature=0.0, top_p=1.0, top_k=0, max_tokens=256, seed=1)


def _entry(category: str, index: int):
    return load_multi_turn(find_data_dir(), category)[index]


def _play(entry, script, native: bool):
    with OpenAITestServer(ServerConfig(script=script)) as server:
        sampler = OpenAISampler([server.url], "mock-model")

        async def go():
            try:
                return await play_multi_turn(entry, sampler, PARAMS, native)
            finally:
                await sampler.aclose()

        return asyncio.run(go()), list(server.requests)


@pytest.mark.parametrize("native", [False, True], ids=["prompting", "native"])
def test_ground_truth_play_passes_with_every_turn_recorded(native: bool) -> None:
    entry = _entry("multi_turn_base", 0)
    rollout, requests = _play(entry, GroundTruthModel([entry]), native)
    turns = rollout.extra["mt_turns"]
    assert len(turns) == len(entry.ground_truth) == 4
    # step 0 calls, step 1 says it is done: two requests a turn
    assert [len(t) for t in turns] == [2, 2, 2, 2] and len(requests) == 8
    separator = "," if native else ", "  # the official FC renderer joins without a space
    assert turns[0][0]["calls"] == [
        "cd(folder='document')",
        "mkdir(dir_name='temp')",
        f"mv(source='final_report.pdf'{separator}destination='temp')",
    ]
    assert turns[0][0]["results"][0] == '{"current_working_directory": "document"}'
    assert turns[0][1]["response"] == DONE and turns[0][1]["calls"] is None  # no call: the turn ends
    assert turns[0][1]["decode_error"]
    assert rollout.code_calls == sum(len(t) for t in entry.ground_truth)
    score = score_multi_turn(entry, turns, native)
    assert (score.correct, score.fields["error_type"]) == (True, None)
    assert [check["checked"] for check in score.fields["turn_checks"]] == [True, True, True, True]


def test_prompting_returns_results_as_one_user_message_and_native_as_tool_messages() -> None:
    entry = _entry("multi_turn_base", 0)
    _, prompting = _play(entry, GroundTruthModel([entry]), False)
    _, native = _play(entry, GroundTruthModel([entry]), True)
    assert prompting[1]["prompt"].startswith("[{'role': 'tool', 'name': \"cd(folder='document')\"")
    assert native[1]["prompt"] == entry.question[0][0]["content"]  # tool messages are not user turns


def test_a_wrong_argument_fails_with_the_official_error_type() -> None:
    entry = _entry("multi_turn_base", 0)
    rollout, _ = _play(entry, GroundTruthModel([entry], wrong=[entry.id]), False)
    first = rollout.extra["mt_turns"][0][0]
    assert first["results"][0] == (
        "Error during execution: GorillaFileSystem.cd() got an unexpected keyword argument 'wrong_argument'"
    )
    score = score_multi_turn(entry, rollout.extra["mt_turns"], False)
    assert (score.correct, score.fields["error_type"], score.fields["failed_turn"]) == (
        False,
        "multi_turn:instance_state_mismatch",
        0,
    )


def test_more_than_twenty_steps_in_a_turn_force_terminate_the_rollout() -> None:
    entry = _entry("multi_turn_base", 0)
    rollout, requests = _play(entry, lambda body: Reply(text="[pwd()]"), False)
    assert rollout.extra["force_terminated"] is True and rollout.stop_reason == "step_limit"
    assert len(rollout.extra["mt_turns"]) == 1 and len(requests) == MAXIMUM_STEP_LIMIT + 1
    score = score_multi_turn(entry, rollout.extra["mt_turns"], False)
    assert score.fields["error_type"] == "multi_turn:force_terminated"


def test_held_out_functions_arrive_at_their_turn() -> None:
    entry = _entry("multi_turn_miss_func", 0)
    (turn,) = entry.missed_functions
    seen_tools = []

    def script(body):
        seen_tools.append(sorted(t["function"]["name"] for t in body.get("tools") or []))
        return GroundTruthModel([entry])(body)

    rollout, requests = _play(entry, script, True)
    assert "sort" not in seen_tools[0] and "sort" in seen_tools[-1]
    assert [r["prompt"] for r in requests].count(ADDED_FUNCTIONS_FC) >= 1
    # the held-out call is made in the turn its function arrives
    assert rollout.extra["mt_turns"][turn][0]["response"] == [{"sort": '{"file_name": "final_report.pdf"}'}]
    score = score_multi_turn(entry, rollout.extra["mt_turns"], True)
    assert score.correct is True


def test_prompting_holds_out_functions_in_the_text() -> None:
    entry = _entry("multi_turn_miss_func", 0)
    (turn,) = entry.missed_functions
    rollout, requests = _play(entry, GroundTruthModel([entry]), False)
    # the log keeps the first 200 characters of the last user message: the docs come first
    assert [r["prompt"][:16] for r in requests].count("[{'name': 'sort'") == 1
    assert score_multi_turn(entry, rollout.extra["mt_turns"], False).correct is True
    assert json.dumps(rollout.extra)  # the record is JSON


def _first_prompt_tokens(entry) -> int:
    """The test server's estimate of the entry's first request (prompting style)."""
    return estimate_prompt_tokens({"messages": prompt_messages(entry)})


@pytest.mark.parametrize("style", CONTEXT_STYLES)
def test_a_conversation_that_outgrows_the_context_scores_as_an_inference_error(style: str) -> None:
    """The server fits the first request and refuses the second (the first one's results
    added) as that server does; the rollout ends there with what it spent."""
    from pytest_agenteval.tasks.bfcl._executable import score as score_executable

    entry = _entry("multi_turn_base", 0)
    first = _first_prompt_tokens(entry)
    context = first + (PARAMS.max_tokens if style == "vllm" else 0) + 1  # vLLM counts max_tokens in
    config = ServerConfig(script=GroundTruthModel([entry]), context_tokens=context, context_style=style)
    with OpenAITestServer(config) as server:
        sampler = OpenAISampler([server.url], "mock-model")

        async def go():
            try:
                return await play_multi_turn(entry, sampler, PARAMS, False)
            finally:
                await sampler.aclose()

        rollout = asyncio.run(go())
        outcomes, url = [r["outcome"] for r in server.requests], server.url
    assert outcomes == ["ok", "400"]  # refused once, never retried
    assert rollout.stop_reason == "context_exceeded"
    (turn,) = rollout.extra["mt_turns"]
    assert len(turn) == 1 and turn[0]["calls"][0] == "cd(folder='document')"
    # what the answered request spent is the rollout's, and the refused request was sent too
    assert (rollout.turns, rollout.attempts, rollout.prompt_tokens) == (1, 2, first)
    assert rollout.completion_tokens == estimate_tokens(turn[0]["response"])
    error = rollout.extra["inference_error"]
    said = re.fullmatch(
        rf"context overflow: the prompt is (\d+) tokens,(.*) over the context of {context} tokens \((.*)\)",
        error,
    )
    assert said is not None and said[3] == f"{url}/chat/completions"
    assert said[2] == (" with the room asked for the reply" if style == "vllm" else "")
    fields = score_executable(entry, rollout, False).fields
    assert (fields["valid"], fields["error_type"]) == (False, "multi_turn:inference_error")
    assert stored_result(rollout.extra["mt_turns"], error) == f"Error during inference: {error}"


def test_other_sampler_errors_stay_errors_of_the_item() -> None:
    entry = _entry("multi_turn_base", 0)
    with OpenAITestServer(ServerConfig(script=GroundTruthModel([entry]), strict_model=True)) as server:
        sampler = OpenAISampler([server.url], "another-model")

        async def go():
            try:
                return await play_multi_turn(entry, sampler, PARAMS, False)
            finally:
                await sampler.aclose()

        with pytest.raises(FatalRequestError, match="HTTP 404"):
            asyncio.run(go())
