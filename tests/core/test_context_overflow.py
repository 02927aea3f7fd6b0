"""A context overflow is one typed error, ContextOverflowError, from every backend: each
server's own refusal is read in one place (models/http/overflow.py), the in-process backends
raise it themselves, and nothing downstream matches words."""

from __future__ import annotations

import asyncio

import pytest

from pytest_agenteval.models import ContextOverflowError, OpenAISampler, SamplerError, SamplingParams
from pytest_agenteval.models.http.overflow import context_overflow
from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from pytest_agenteval.testing._overflow import CONTEXT_STYLES

PARAMS = SamplingParams(temperature=0.0, top_p=1.0, top_k=0, max_tokens=64, seed=1)

# (server, status, the reply body as the server sends it, (prompt, context) or None: not an overflow)
BODIES = [
    # llama.cpp's C++ server, tools/server/server.cpp: send_error(..., ERROR_TYPE_EXCEED_CONTEXT_SIZE)
    # with n_prompt_tokens and n_ctx, formatted by format_error_response (tools/server/utils.hpp)
    (
        "llama-server",
        400,
        b'{"error":{"code":400,"message":"request (8216 tokens) exceeds the available context size '
        b'(8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":8216,'
        b'"n_ctx":8192}}',
        (8216, 8192),
    ),
    # llama.cpp before the numbers were in the message (same type and fields)
    (
        "llama-server (older)",
        400,
        b'{"error":{"code":400,"message":"the request exceeds the available context size, try '
        b'increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}',
        (5000, 4096),
    ),
    # vLLM, vllm/entrypoints/openai/serving_engine.py OpenAIServing._validate_input (v0.6-0.8)
    (
        "vllm (older)",
        400,
        b'{"object":"error","message":"This model\'s maximum context length is 4096 tokens. However, '
        b"you requested 4500 tokens (4436 in the messages, 64 in the completion). Please reduce the "
        b'length of the messages or completion.","type":"BadRequestError","param":null,"code":400}',
        (4436, 4096),
    ),
    # vLLM >= 0.10: the prompt alone over max_model_len, in the wrapped error object
    (
        "vllm",
        400,
        b'{"error":{"message":"This model\'s maximum context length is 4096 tokens. However, your '
        b'request has 5000 input tokens. Please reduce the length of the input messages.",'
        b'"type":"BadRequestError","param":null,"code":400}}',
        (5000, 4096),
    ),
    # vLLM >= 0.10: the prompt fits, max_tokens does not (a reply seen from a vLLM server)
    (
        "vllm (max_tokens)",
        400,
        b'{"error":{"message":"\'max_tokens\' or \'max_completion_tokens\' is too large: 8000. This '
        b"model's maximum context length is 4096 tokens and your request has 2778 input tokens "
        b'(8000 > 4096 - 2778). None","type":"BadRequestError","param":null,"code":400}}',
        (2778, 4096),
    ),
    # SGLang, python/sglang/srt/managers/tokenizer_manager.py _validate_one_request, sent by
    # create_error_response (a reply seen from an SGLang server)
    (
        "sglang",
        400,
        b'{"object":"error","message":"The input (43028 tokens) is longer than the model\'s context '
        b'length (40960 tokens).","type":"BadRequestError","param":null,"code":400}',
        (43028, 40960),
    ),
    # SGLang: the input and max_new_tokens together (same function)
    (
        "sglang (max_new_tokens)",
        400,
        b'{"object":"error","message":"Requested token count exceeds the model\'s maximum context '
        b"length of 32768 tokens. You requested a total of 33000 tokens: 32000 tokens from the input "
        b"messages and 1000 tokens for the completion. Please reduce the number of tokens in the input "
        b'messages or the completion to fit within the limit.","type":"BadRequestError","param":null,'
        b'"code":400}',
        (32000, 32768),
    ),
    # llama-cpp-python's server, llama_cpp/server/errors.py ErrorResponseFormatters.context_length_exceeded
    (
        "llama-cpp-python",
        400,
        b'{"error":{"message":"This model\'s maximum context length is 2048 tokens. However, you '
        b"requested 2300 tokens (2300 in the messages, 0 in the completion). Please reduce the length "
        b'of the messages or completion.","type":"invalid_request_error","param":"messages",'
        b'"code":"context_length_exceeded"}}',
        (2300, 2048),
    ),
    # OpenAI's API error reference: code context_length_exceeded, with and without numbers
    (
        "openai",
        400,
        b'{"error":{"message":"This model\'s maximum context length is 128000 tokens. However, your '
        b'messages resulted in 130000 tokens. Please reduce the length of the messages.","type":'
        b'"invalid_request_error","param":"messages","code":"context_length_exceeded"}}',
        (130000, 128000),
    ),
    (
        "openai (newer)",
        400,
        b'{"error":{"message":"Your input exceeds the context window of this model. Please adjust your '
        b'input and try again.","type":"invalid_request_error","param":"input","code":'
        b'"context_length_exceeded"}}',
        (None, None),
    ),
    # not overflows: other refusals, and the same words under another status
    (
        "bad request",
        400,
        b'{"error":{"message":"\'messages\' must be a non-empty list.","type":'
        b'"invalid_request_error","param":null,"code":null}}',
        None,
    ),
    ("stream refused", 400, b'{"error":{"message":"stream is not supported by this server"}}', None),
    ("plain text", 400, b"Bad Request", None),
    (
        "overloaded",
        503,
        b'{"error":{"message":"the request exceeds the available context size",'
        b'"type":"exceed_context_size_error","n_prompt_tokens":1,"n_ctx":1}}',
        None,
    ),
    ("auth", 401, b'{"error":{"message":"Incorrect API key provided.","code":"invalid_api_key"}}', None),
]


@pytest.mark.parametrize(("status", "body", "expected"), [b[1:] for b in BODIES], ids=[b[0] for b in BODIES])
def test_each_servers_refusal_is_read_as_an_overflow_with_its_numbers(status, body, expected) -> None:
    found = context_overflow(status, body, "http://server/v1")
    if expected is None:
        assert found is None
    else:
        assert isinstance(found, ContextOverflowError) and isinstance(found, SamplerError)
        assert (found.prompt_tokens, found.context) == expected
        assert found.detail == "http://server/v1"


def test_the_message_says_the_numbers_in_one_line() -> None:
    assert str(ContextOverflowError(8216, 8192, "llama.cpp in-process, --n-ctx")) == (
        "context overflow: the prompt is 8216 tokens, over the context of 8192 tokens "
        "(llama.cpp in-process, --n-ctx)"
    )
    assert str(ContextOverflowError(2778, 4096, "vllm")) == (
        "context overflow: the prompt is 2778 tokens, with the room asked for the reply over the "
        "context of 4096 tokens (vllm)"
    )
    assert str(ContextOverflowError(None, None)) == "context overflow: the prompt over the model's context"


def overflow_of(sampler, messages) -> ContextOverflowError:
    """The ContextOverflowError `sampler.complete(messages)` raises (the sampler closed after)."""

    async def go():
        try:
            return await sampler.complete(messages, PARAMS)
        finally:
            await sampler.aclose()

    with pytest.raises(ContextOverflowError) as caught:
        asyncio.run(go())
    return caught.value


@pytest.mark.parametrize("style", CONTEXT_STYLES)
def test_the_openai_sampler_raises_the_type_for_each_servers_refusal_and_does_not_retry(style: str) -> None:
    messages = [{"role": "user", "content": "x" * 400}]  # ~104 tokens by the server's estimate
    config = ServerConfig(context_tokens=50, context_style=style)
    with OpenAITestServer(config) as server:
        sampler = OpenAISampler([server.url], "mock-model")
        overflow = overflow_of(sampler, messages)
        sent = len(server.requests)
    assert (overflow.prompt_tokens, overflow.context) == (104, 50)
    assert overflow.detail == f"{server.url}/chat/completions"
    assert sent == 1  # refused for good: never retried
    assert sampler.stats()["context_overflow"] == 1


def test_vllm_refuses_a_prompt_that_fits_when_max_tokens_does_not() -> None:
    messages = [{"role": "user", "content": "x" * 100}]  # ~29 tokens
    with OpenAITestServer(ServerConfig(context_tokens=50, context_style="vllm")) as server:
        overflow = overflow_of(OpenAISampler([server.url], "mock-model"), messages)  # 29 + 64 > 50
    assert (overflow.prompt_tokens, overflow.context) == (29, 50)


def test_the_in_process_llama_sampler_raises_the_type() -> None:
    pytest.importorskip("llama_cpp", reason="the in-process backend needs llama-cpp-python")
    from pytest_agenteval.models.backends.llama import LlamaSampler, embedded_model_path

    try:
        path = embedded_model_path()
    except SamplerError as exc:
        pytest.skip(f"the embedded model: {exc}")
    overflow = overflow_of(
        LlamaSampler(path, embedded=True, n_ctx=64), [{"role": "user", "content": "word " * 200}]
    )
    assert overflow.context == 64 and overflow.prompt_tokens > 200
    assert overflow.detail == "llama.cpp in-process, --n-ctx"


@pytest.mark.parametrize("backend", ["embedded", "endpoint"])
def test_a_retool_trajectory_over_the_context_ends_and_is_scored(run_suite, backend: str) -> None:
    """AIME retool: tokens in/out on the embedded model, messages on an endpoint refusing as
    llama.cpp's server does. The item is scored (unsolved), not an error."""
    from tests.conftest import read_results

    args = ("--mode=retool", "--limit=1", "--val-n=1")
    if backend == "embedded":
        pytest.importorskip("llama_cpp", reason="the embedded model needs llama-cpp-python")
        result, path = run_suite(*args, "--n-ctx=32")
        detail = "llama.cpp in-process, --n-ctx"
    else:
        with OpenAITestServer(ServerConfig(context_tokens=32)) as server:
            result, path = run_suite(*args, f"--endpoint={server.url}", "--model-name=mock-model")
            detail = f"{server.url}/chat/completions"
    result.assert_outcomes(failed=1)
    (problem,), (summary,) = read_results(path)
    assert problem["error"] is None and summary["errors"]["items"] == 0
    (generation,) = problem["generations"]
    assert (generation["stop_reason"], generation["turns"], generation["correct"]) == (
        "context_exceeded",
        0,
        False,
    )
    assert generation["context_overflow"].startswith("context overflow: the prompt is ")
    assert generation["context_overflow"].endswith(f"over the context of 32 tokens ({detail})")


def test_the_tool_loop_ends_a_trajectory_over_the_context_instead_of_raising() -> None:
    """The loop GAIA's default agent runs, on an endpoint that refuses the prompt as vLLM
    does: the trajectory ends with `context_exceeded` and the refusal in its record."""
    from pytest_agenteval.api.records import Problem
    from pytest_agenteval.api.suite import RolloutContext
    from pytest_agenteval.config.settings import Settings
    from pytest_agenteval.solvers.tool_loop import LoopBudget, run_tool_loop

    messages = [{"role": "user", "content": "x" * 96}]  # 28 tokens by the server's estimate
    budget = LoopBudget(
        max_turns=4, max_calls=4, max_trajectory_tokens=4096, max_turn_tokens=16, max_tool_response_tokens=64
    )
    with OpenAITestServer(ServerConfig(context_tokens=20, context_style="vllm")) as server:
        sampler = OpenAISampler([server.url], "mock-model")
        ctx = RolloutContext(
            settings=Settings(),
            sampler=sampler,
            problem=Problem(suite="gaia", id="t", index=0, text="", reference=None),
            sample_index=0,
            seed=1,
            resources=None,
            sampling={"temperature": 0.0, "top_p": 1.0, "top_k": 0, "max_tokens": 16},
            samples=1,
        )

        async def go():
            try:
                return await run_tool_loop(ctx, messages, budget, False, "FINAL ANSWER:")
            finally:
                await sampler.aclose()

        rollout = asyncio.run(go())
        url = server.url
    assert (rollout.stop_reason, rollout.turns, rollout.text) == ("context_exceeded", 0, "")
    assert rollout.extra["context_overflow"] == (
        f"context overflow: the prompt is 28 tokens, over the context of 20 tokens ({url}/chat/completions)"
    )


def test_a_single_turn_overflow_is_an_error_of_its_item_and_does_not_stop_the_run(run_suite) -> None:
    """Text-only AIME has no conversation to end: the item errors, with the refusal in one
    line, and the run goes on (a refused request of another kind stops it, as -x does)."""
    from tests.conftest import read_results

    with OpenAITestServer(ServerConfig(context_tokens=8, context_style="vllm")) as server:
        result, path = run_suite(
            "--limit=2", "--val-n=1", f"--endpoint={server.url}", "--model-name=mock-model"
        )
        sent = len(server.requests)
    result.assert_outcomes(errors=2)
    problems, (summary,) = read_results(path)
    assert sent == 2 and summary["errors"]["items"] == 2
    for problem in problems:
        assert problem["error"].startswith("sample 0: ContextOverflowError: context overflow: the prompt is ")
