"""`--presence-penalty X`: on the wire to OpenAI-compatible servers, into llama.cpp's sampler
in-process, a start-up error on backends without one, and out of the request (and its cache
key) when 0, so the caches of earlier runs stay valid."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pytest_agenteval.api.sampler import SamplingParams
from pytest_agenteval.config.options import build_settings
from pytest_agenteval.models import LlamaSampler, ModelChoice, embedded_model_path
from pytest_agenteval.models.cache import GenerationCache
from pytest_agenteval.plugin.checks import check_transformers
from pytest_agenteval.testing import OpenAITestServer, ServerConfig

BASE = {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "max_tokens": 100, "seed": 7, "stop": []}
# The key of this request before --presence-penalty existed (commit 2590077): the same now.
OLD_KEY = "f8d1a7e6e95d92b1e4d5bfaf04100637a37f6f96684b07bebe149d7d07724f80"
MODEL = {"backend": "openai", "name": "m"}
HI = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("penalty", "expected"),
    [(0.0, BASE), (1.5, {**BASE, "presence_penalty": 1.5}), (-0.5, {**BASE, "presence_penalty": -0.5})],
)
def test_as_dict_carries_the_penalty_only_when_set(penalty: float, expected: dict) -> None:
    assert SamplingParams(0.6, 0.95, 20, 100, 7, presence_penalty=penalty).as_dict() == expected


def test_the_cache_key_is_unchanged_without_a_penalty_and_differs_with_one() -> None:
    key = GenerationCache.completion_key
    assert key(MODEL, HI, SamplingParams(0.6, 0.95, 20, 100, 7), None) == OLD_KEY
    assert key(MODEL, HI, SamplingParams(0.6, 0.95, 20, 100, 7, presence_penalty=1.5), None) != OLD_KEY


@pytest.mark.parametrize(("args", "sent"), [((), {None}), (("--presence-penalty=0.5",), {0.5})])
def test_the_endpoint_gets_presence_penalty_on_the_wire(run_suite, args: tuple[str, ...], sent: set) -> None:
    with OpenAITestServer(ServerConfig(answer="\\boxed{1}", log_bodies=True)) as server:
        result, _ = run_suite(f"--endpoint={server.url}", "--val-n=1", "--limit=2", *args)
        bodies = [r["body"] for r in server.requests]
    result.assert_outcomes(failed=2)
    assert (len(bodies), {b.get("presence_penalty") for b in bodies}) == (2, sent)


def test_llama_cpp_in_process_applies_it() -> None:
    """Greedy, so only the penalty can change the text: 2.0 against none on a prompt that
    invites repeating itself."""
    llama = LlamaSampler(embedded_model_path(), embedded=True, n_threads=1)
    messages = [{"role": "user", "content": "Say the word 'yes' twenty times, separated by commas."}]

    def text(penalty: float) -> str:
        params = SamplingParams(0.0, 1.0, -1, 32, 0, presence_penalty=penalty)
        return asyncio.run(llama.complete(messages, params)).text

    plain, again, penalised = text(0.0), text(0.0), text(2.0)
    assert plain == again  # greedy is deterministic: the difference is the penalty's
    assert penalised != plain


def test_an_sdk_sampler_refuses_it_at_start_up(aime_suite: pytest.Pytester) -> None:
    result = aime_suite.runpytest_inprocess(
        "--model-path=tinker://run-1/sampler_weights/000100",
        "--base-model=Qwen/Qwen3-0.6B",
        "--presence-penalty=1.5",
    )
    assert result.ret == 4
    assert [line for line in result.stderr.lines if line.startswith("ERROR")] == [
        "ERROR: --presence-penalty 1.5: tinker:// has no presence penalty; it works with --endpoint servers, "
        "--serve (vLLM, SGLang, llama.cpp) and in-process .gguf models, or drop it (a preset's: pass "
        "--presence-penalty 0)"
    ]


def test_the_transformers_backend_refuses_it(pytester: pytest.Pytester) -> None:
    settings = build_settings(pytester.parseconfig("--agenteval-preset=qwen3-nonthinking"))
    refused = r"^--presence-penalty 1.5: the in-process transformers backend has no presence penalty;"
    with pytest.raises(pytest.UsageError, match=refused):
        check_transformers(ModelChoice("transformers", path=Path("no-checkpoint-needed")), settings)


def test_out_of_range_is_a_start_up_error(aime_suite: pytest.Pytester) -> None:
    result = aime_suite.runpytest_inprocess("--presence-penalty=2.5")
    assert result.ret == 4
    assert "ERROR: --presence-penalty must be within -2 to 2, got 2.5" in result.stderr.lines
