"""BFCL, GAIA and the datagen judge read only the answer after a reasoning model's thoughts:
each with a case the thoughts decided before (docs/reasoning.md)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from pytest_agenteval.api.records import THINKING_TRUNCATED, GenerationRecord, Problem, generation_from_dict
from pytest_agenteval.api.sampler import Completion
from pytest_agenteval.models import OpenAISampler, SamplingParams
from pytest_agenteval.solvers.single_turn import single_turn_rollout
from pytest_agenteval.tasks.bfcl import load_bfcl, score_text
from pytest_agenteval.tasks.bfcl.suite import _to_score
from pytest_agenteval.tasks.datagen._judge import JudgeSpec, local_judge
from pytest_agenteval.tasks.gaia.suite import Gaia
from pytest_agenteval.testing import OpenAITestServer, ServerConfig


def _bfcl_entry_and_right_call():
    entry = load_bfcl(("simple_python",))[0]
    ((name, params),) = entry.ground_truth[0].items()
    args = ", ".join(f"{k}={v[0]!r}" for k, v in params.items() if v and v[0] != "")
    return entry, f"[{name}({args})]", name


def _bfcl_verdict(text: str, finish_reason: str = "stop") -> tuple[bool, str]:
    entry, _, _ = _bfcl_entry_and_right_call()
    rollout = single_turn_rollout(Completion(text=text, finish_reason=finish_reason))
    kept = GenerationRecord(0, 0, rollout, _to_score(entry, score_text(entry, rollout.text))).to_dict()
    return kept["correct"], kept["stop_reason"]


def test_bfcl_parses_the_call_after_the_thoughts() -> None:
    """Before: the think block made the reply undecodable, the right call after it invalid."""
    _, right, name = _bfcl_entry_and_right_call()
    assert _bfcl_verdict(f"<think>\nFirst try [{name}()]? No, it needs arguments.\n</think>\n{right}") == (
        True,
        "answer",
    )


def test_bfcl_a_call_in_thoughts_cut_off_is_thinking_truncated() -> None:
    _, right, _ = _bfcl_entry_and_right_call()
    assert _bfcl_verdict(f"<think>\nI will answer {right} once I", "length") == (False, THINKING_TRUNCATED)


def _gaia_verdict(text: str) -> tuple[bool, str | None, str]:
    problem = Problem("gaia", "t1", 0, "Capital of France?", "Paris")
    rollout = generation_from_dict(
        {"problem_id": "t1", "sample_index": 0, "seed": 0, "text": text}, ()
    ).rollout
    score = Gaia().score(problem, rollout, SimpleNamespace(gaia_unordered_lists=False))
    kept = GenerationRecord(0, 0, rollout, score).to_dict()
    return kept["correct"], kept["answer"], kept["stop_reason"]


def test_gaia_a_final_answer_in_thoughts_cut_off_is_not_scored() -> None:
    """Before: `FINAL ANSWER: Paris` in the unclosed thoughts was extracted and correct."""
    assert _gaia_verdict("<think>\nSo FINAL ANSWER: Paris\nbut let me check the") == (
        False,
        None,
        THINKING_TRUNCATED,
    )


def test_gaia_extracts_the_final_answer_after_the_thoughts() -> None:
    assert _gaia_verdict("<think>\nFINAL ANSWER: Lyon? No.\n</think>\nFINAL ANSWER: Paris") == (
        True,
        "Paris",
        "recorded",
    )


def test_the_judge_reads_its_verdict_after_the_thoughts() -> None:
    """A template that opens the think block in the prompt: the reply has only the closing
    tag. Before: both objects carried the nonce and the verdict was invalid."""
    nonce = "n0nce"
    reply = (
        f'Maybe {{"nonce": "{nonce}", "verdict": "A>B", "reason": "first look"}}.\n</think>\n'
        f'{{"nonce": "{nonce}", "verdict": "B>A", "reason": "B is right"}}'
    )
    with OpenAITestServer(ServerConfig(answer=reply)) as server:
        sampler = OpenAISampler([server.url], "mock-model")
        judge = local_judge(JudgeSpec("thinking-judge"), sampler)
        params = SamplingParams(temperature=0.0, top_p=1.0, top_k=0, max_tokens=256, seed=1)

        async def go():
            try:
                return await judge.judge(
                    "pairwise", [{"role": "user", "content": "A or B?"}], nonce, params, 1
                )
            finally:
                await sampler.aclose()

        result = asyncio.run(go())
    assert (result["status"], result["verdict"], result["winner"], result["asks"]) == ("valid", "B>A", "B", 1)


def test_a_judge_reply_cut_off_in_its_thoughts_is_reasked_and_invalid() -> None:
    nonce = "n0nce"
    reply = f'<think>\nThe verdict is {{"nonce": "{nonce}", "verdict": "A>B", "reason": "x"}} unless'
    with OpenAITestServer(ServerConfig(answer=reply)) as server:
        sampler = OpenAISampler([server.url], "mock-model")
        judge = local_judge(JudgeSpec("thinking-judge"), sampler)
        params = SamplingParams(temperature=0.0, top_p=1.0, top_k=0, max_tokens=16, seed=1)

        async def go():
            try:
                return await judge.judge(
                    "pairwise", [{"role": "user", "content": "A or B?"}], nonce, params, 1
                )
            finally:
                await sampler.aclose()

        result = asyncio.run(go())
    assert (result["status"], result["asks"], result["error"]) == (
        "invalid",
        2,
        "thinking_truncated: the reasoning never closed within max_tokens, no verdict",
    )
