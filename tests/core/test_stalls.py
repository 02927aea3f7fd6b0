"""A silent server is caught by the idle timeout of a streamed reply (or, without
streaming, by a deadline from max_tokens and throughput), never by waiting out the
request timeout; an honest slow stream is never cut (issue 14 item 1)."""

from __future__ import annotations

from collections import Counter

import pytest

from pytest_agenteval.models import OpenAISampler, RetryPolicy, SamplingParams
from pytest_agenteval.models.http.stream import StreamError, read_stream
from pytest_agenteval.testing import FaultContext, OpenAITestServer, ServerConfig
from tests.conftest import read_results, write_jsonl

PARAMS = SamplingParams(temperature=0.6, top_p=0.9, top_k=-1, max_tokens=64, seed=1234)
MESSAGES = [{"role": "user", "content": "What is 7 * 10?"}]
RETRY = RetryPolicy(max_attempts=4, base_delay_s=0.01, max_delay_s=0.05, max_total_s=60)
STALL_S = 30.0  # far past every idle timeout below: a stall not caught would show


def sampler(server: OpenAITestServer, **kwargs) -> OpenAISampler:
    return OpenAISampler([server.url], "mock-model", retry=RETRY, **kwargs)


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["stall", "stall_stream"])
async def test_a_silent_stream_is_a_stall_caught_by_the_idle_timeout_and_retried_once(kind: str) -> None:
    config = ServerConfig(
        answer="so \\boxed{70}", fail_first_k_attempts_per_request=1, fail_first_k_kind=kind, stall_s=STALL_S
    )
    with OpenAITestServer(config) as server:
        backend = sampler(server, idle_timeout_s=0.3, request_timeout_s=600)
        completion = await backend.complete(MESSAGES, PARAMS)
        await backend.aclose()
        outcomes = [r["outcome"] for r in server.requests]
    assert completion.text == "so \\boxed{70}" and completion.attempts == 2
    assert outcomes == [kind, "ok"]
    stats = backend.stats()
    assert (stats["stalls_idle"], stats["retry_stall"], stats["retries"]) == (1, 1, 1)


@pytest.mark.asyncio
async def test_an_honest_slow_stream_longer_than_the_idle_timeout_is_not_cut() -> None:
    answer = "a long and honest derivation, chunk after chunk, ends in \\boxed{70}"  # 5 chunks
    config = ServerConfig(answer=answer, stream_delay_ms=150)  # ~1 s in all, 150 ms between bytes
    with OpenAITestServer(config) as server:
        backend = sampler(server, idle_timeout_s=0.5)
        completion = await backend.complete(MESSAGES, PARAMS)
        await backend.aclose()
        (logged,) = server.requests
    assert completion.text == answer and completion.attempts == 1
    assert logged["latency"] > 0.5  # longer than the idle timeout, and never cut
    assert completion.completion_tokens > 0  # usage came in the last chunk
    assert not any(k.startswith("stalls_") for k in backend.stats())


@pytest.mark.asyncio
async def test_without_streaming_a_stall_is_caught_by_the_max_tokens_deadline() -> None:
    # the server refuses `stream`; after 3 replies a throughput is known, then request 5 stalls
    def plan(ctx: FaultContext) -> str | None:
        return "stall" if ctx.body["seed"] == 5 and ctx.attempt == 0 else None

    config = ServerConfig(support_stream=False, fault_plan=plan, stall_s=STALL_S, latency_ms=20)
    with OpenAITestServer(config) as server:
        backend = sampler(server, idle_timeout_s=0.3, request_timeout_s=600)
        for seed in range(1, 6):
            params = SamplingParams(0.6, 0.9, -1, 16, seed)
            completion = await backend.complete(MESSAGES, params)
        await backend.aclose()
        outcomes = Counter(r["outcome"] for r in server.requests)
    assert completion.attempts == 2
    stats = backend.stats()
    assert stats["stream_refused"] == 1 and outcomes["400"] == 1  # asked once, then never again
    assert (stats["stalls_deadline"], stats["retries"], outcomes["stall"], outcomes["ok"]) == (1, 1, 1, 5)


@pytest.mark.asyncio
async def test_a_stream_cut_before_its_finish_is_incomplete() -> None:
    async def lines(*chunks: bytes):
        for chunk in chunks:
            yield chunk

    start = b'data: {"choices":[{"index":0,"delta":{"content":"so"},"finish_reason":null}]}\n'
    with pytest.raises(StreamError, match="before the reply did"):
        await read_stream(lines(start))
    with pytest.raises(StreamError, match="finish_reason"):
        await read_stream(lines(start, b"data: [DONE]\n"))
    end = (
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"completion_tokens":3}}\n'
    )
    assert await read_stream(lines(start, end, b"data: [DONE]\n")) == {
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "so"}}],
        "usage": {"completion_tokens": 3},
    }


THIRTY = [{"id": i, "problem": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(30)]


def test_a_run_with_silent_stalls_completes_and_the_summary_counts_them(run_suite, pytester) -> None:
    data = write_jsonl(pytester.path / "thirty.jsonl", THIRTY)
    config = ServerConfig(
        answer="\\boxed{14} (seed {seed})",
        fault_rate=0.1,
        fault_seed=3,
        fault_kinds={"stall": 1, "stall_stream": 1},
        stall_s=STALL_S,
        latency_ms=20,
    )
    with OpenAITestServer(config) as server:
        result, out = run_suite(
            f"--endpoint={server.url}",
            "--val-n=4",
            "--idle-timeout=0.5",
            "--agenteval-no-cache",
            "-n",
            "2",
            data=data,
        )
        faults = Counter(r["outcome"] for r in server.requests if r["outcome"] != "ok")
    problems, (summary,) = read_results(out)
    assert summary["complete"] is True and len(problems) == 30
    assert all(len(p["generations"]) == 4 for p in problems)
    assert set(faults) == {"stall", "stall_stream"} and sum(faults.values()) >= 6
    assert summary["stalls"] == {"idle": sum(faults.values())}  # every one caught by the idle timeout
    assert summary["requests"]["attempts"] == 120 + sum(faults.values())
    result.assert_outcomes(passed=1, failed=29)
