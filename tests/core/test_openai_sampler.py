"""The HTTP backend against a real-socket OpenAI-protocol server: what is sent,
retries on every transient fault, immediate errors on refusals, the concurrency cap."""

from __future__ import annotations

import time

import pytest

from pytest_agenteval.models import (
    FatalRequestError,
    OpenAISampler,
    RetryPolicy,
    SamplerError,
    SamplingParams,
)
from pytest_agenteval.testing import OpenAITestServer, ServerConfig

PARAMS = SamplingParams(temperature=0.6, top_p=0.9, top_k=-1, max_tokens=64, seed=1234)
MESSAGES = [{"role": "user", "content": "What is 7 * 10?"}]
FAST_RETRY = RetryPolicy(max_attempts=6, base_delay_s=0.01, max_delay_s=0.05, max_total_s=30)


def sampler(server: OpenAITestServer, **kwargs) -> OpenAISampler:
    kwargs.setdefault("retry", FAST_RETRY)
    return OpenAISampler([server.url], "mock-model", **kwargs)


@pytest.mark.asyncio
async def test_sends_exactly_the_sampling_parameters_and_reads_the_reply() -> None:
    with OpenAITestServer(ServerConfig(answer="so \\boxed{70}")) as server:
        backend = sampler(server)
        completion = await backend.complete(MESSAGES, PARAMS)
        await backend.aclose()
        (logged,) = server.requests
    assert completion.text == "so \\boxed{70}"
    assert (completion.finish_reason, completion.attempts, completion.prompt_tokens > 0) == ("stop", 1, True)
    assert logged["seed"] == 1234 and logged["outcome"] == "ok"


def test_top_k_and_thinking_are_sent_only_when_asked() -> None:
    plain = OpenAISampler(["http://x/v1"], "m").body(MESSAGES, PARAMS)
    assert "top_k" not in plain and "chat_template_kwargs" not in plain
    asked = OpenAISampler(
        ["http://x/v1"], "m", extra_body={"chat_template_kwargs": {"enable_thinking": False}}
    )
    body = asked.body(MESSAGES, SamplingParams(1.0, 0.7, 20, 16, 5))
    assert (body["top_k"], body["chat_template_kwargs"], body["seed"]) == (20, {"enable_thinking": False}, 5)


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["429", "500", "503", "reset", "truncated"])
async def test_transient_faults_are_retried_until_success(kind: str) -> None:
    config = ServerConfig(fail_first_k_attempts_per_request=2, fail_first_k_kind=kind, retry_after="0")
    with OpenAITestServer(config) as server:
        backend = sampler(server)
        completion = await backend.complete(MESSAGES, PARAMS)
        await backend.aclose()
        outcomes = [r["outcome"] for r in server.requests]
    assert outcomes == [kind, kind, "ok"]
    assert completion.attempts == 3
    assert backend.stats()["retries"] == 2


@pytest.mark.asyncio
async def test_retry_after_is_honoured() -> None:
    config = ServerConfig(fail_first_k_attempts_per_request=1, fail_first_k_kind="429", retry_after="0.4")
    with OpenAITestServer(config) as server:
        backend = sampler(server)
        started = time.monotonic()
        await backend.complete(MESSAGES, PARAMS)
        elapsed = time.monotonic() - started
        await backend.aclose()
    assert elapsed >= 0.4


@pytest.mark.asyncio
async def test_a_stall_past_the_timeout_is_retried() -> None:
    config = ServerConfig(fail_first_k_attempts_per_request=1, fail_first_k_kind="stall", stall_s=5)
    with OpenAITestServer(config) as server:
        backend = sampler(server, request_timeout_s=0.5)
        completion = await backend.complete(MESSAGES, PARAMS)
        await backend.aclose()
    assert completion.attempts == 2
    assert backend.stats()["retry_timeout"] == 1


@pytest.mark.asyncio
async def test_gives_up_after_the_attempt_budget() -> None:
    config = ServerConfig(fail_first_k_attempts_per_request=50, fail_first_k_kind="500")
    with OpenAITestServer(config) as server:
        backend = sampler(server, retry=RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.01))
        with pytest.raises(SamplerError, match="gave up after 3 attempts .*last error: 500"):
            await backend.complete(MESSAGES, PARAMS)
        await backend.aclose()
        assert len(server.requests) == 3


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("config", "message"),
    [
        (ServerConfig(api_key="right"), "HTTP 401"),
        (ServerConfig(strict_model=True, model="other"), "HTTP 404: The model `mock-model` does not exist"),
    ],
)
async def test_refusals_fail_at_once(config: ServerConfig, message: str) -> None:
    with OpenAITestServer(config) as server:
        backend = sampler(server)
        with pytest.raises(FatalRequestError, match=message):
            await backend.complete(MESSAGES, PARAMS)
        await backend.aclose()
        assert len(server.requests) == 1


@pytest.mark.asyncio
async def test_concurrency_caps_requests_in_flight_per_endpoint() -> None:
    import asyncio

    with (
        OpenAITestServer(ServerConfig(latency_ms=100)) as first,
        OpenAITestServer(ServerConfig(latency_ms=100)) as second,
    ):
        backend = OpenAISampler([first.url, second.url], "mock-model", concurrency=3)
        params = [SamplingParams(1.0, 1.0, -1, 8, seed) for seed in range(24)]
        await asyncio.gather(*(backend.complete(MESSAGES, p) for p in params))
        await backend.aclose()
        stats = first.stats(), second.stats()
    assert [s["max_in_flight"] for s in stats] == [3, 3]
    assert [s["total_requests"] for s in stats] == [12, 12]


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "not streamed"])
async def test_requests_one_after_another_share_one_connection(stream: bool) -> None:
    """Keep-alive: a streamed reply read to its [DONE] line leaves the connection usable,
    as a whole body does; 24 sequential requests are 24 on one socket, not 24 sockets."""
    with OpenAITestServer(ServerConfig(answer="\\boxed{70}")) as server:
        backend = sampler(server, stream=stream, concurrency=1)
        for seed in range(24):
            await backend.complete(MESSAGES, SamplingParams(0.6, 0.9, -1, 64, seed))
        await backend.aclose()
        stats = server.stats()
    assert (stats["total_requests"], stats["connections"]) == (24, 1)
