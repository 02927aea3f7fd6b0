"""Tests of the mock OpenAI server itself, over real loopback sockets."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from pytest_agenteval.testing import (
    DEFAULT_ANSWER,
    AsyncOpenAITestServer,
    FaultContext,
    FaultInjector,
    OpenAITestServer,
    Reply,
    ScriptedToolModel,
    ServerConfig,
    ToolCall,
    estimate_tokens,
    format_text_tool_call,
    get_stats,
    parse_fault_mix,
    request_key,
    reset_stats,
    start_server_process,
    stop_server_process,
)

Result = tuple[int, dict[str, str], Any]


def chat_body(text: str = "What is 7 * 10?", **extra: Any) -> dict[str, Any]:
    return {"model": "mock-model", "messages": [{"role": "user", "content": text}], **extra}


async def _post(
    url: str,
    body: Any,
    *,
    path: str = "/chat/completions",
    headers: dict[str, str] | None = None,
    timeout: float = 5.0,
) -> Result:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    client_timeout = aiohttp.ClientTimeout(total=timeout)
    async with aiohttp.ClientSession(timeout=client_timeout) as session:
        async with session.post(url + path, data=data, headers=headers) as resp:
            raw = await resp.read()
            return resp.status, dict(resp.headers), json.loads(raw)


def post(url: str, body: Any, **kwargs: Any) -> Result:
    return asyncio.run(_post(url, body, **kwargs))


def get(url: str, path: str, headers: dict[str, str] | None = None) -> Result:
    async def _get() -> Result:
        async with aiohttp.ClientSession() as session:
            async with session.get(url + path, headers=headers) as resp:
                return resp.status, dict(resp.headers), await resp.json()

    return asyncio.run(_get())


# -- wire format -----------------------------------------------------------------------
def test_chat_completion_shape_n_choices_and_usage() -> None:
    cfg = ServerConfig(answer="choice {index} of {n}, seed {seed}: \\boxed{70}")
    with OpenAITestServer(cfg) as srv:
        status, _, data = post(srv.url, chat_body(n=3, seed=11))
    assert status == 200
    assert data["object"] == "chat.completion"
    assert data["model"] == "mock-model"
    assert data["id"].startswith("chatcmpl-") and isinstance(data["created"], int)
    texts = [c["message"]["content"] for c in data["choices"]]
    assert texts == [f"choice {i} of 3, seed 11: \\boxed{{70}}" for i in range(3)]
    assert [c["index"] for c in data["choices"]] == [0, 1, 2]
    assert {c["finish_reason"] for c in data["choices"]} == {"stop"}
    prompt_tokens = 4 + estimate_tokens("What is 7 * 10?")
    completion_tokens = sum(estimate_tokens(t) for t in texts)
    assert data["usage"] == {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    [entry] = srv.requests
    assert (entry["outcome"], entry["n"], entry["seed"]) == ("ok", 3, 11)
    assert entry["key"] == request_key(chat_body(n=3, seed=11))


def test_support_n_false_returns_one_choice() -> None:
    with OpenAITestServer(support_n=False) as srv:
        _, _, data = post(srv.url, chat_body(n=5))
        assert [c["message"]["content"] for c in data["choices"]] == [DEFAULT_ANSWER]
        assert srv.requests[0]["n"] == 1


def test_completions_endpoint_and_max_tokens_length() -> None:
    with OpenAITestServer(answer="0123456789abcdef") as srv:
        status, _, data = post(srv.url, {"prompt": "hello", "max_tokens": 2}, path="/completions")
        _, _, full = post(srv.url, {"prompt": ["hello"]}, path="/completions")
        _, _, chat = post(srv.url, chat_body(max_tokens=3))
    assert status == 200 and data["object"] == "text_completion"
    assert data["choices"][0]["text"] == "01234567"
    assert data["choices"][0]["finish_reason"] == "length"
    assert data["usage"]["completion_tokens"] == 2
    assert full["choices"][0] == {
        "index": 0,
        "text": "0123456789abcdef",
        "logprobs": None,
        "finish_reason": "stop",
    }
    assert chat["choices"][0]["message"]["content"] == "0123456789ab"
    assert chat["choices"][0]["finish_reason"] == "length"


def test_auth_models_and_error_shapes() -> None:
    with OpenAITestServer(api_key="sk-test", model="m1", strict_model=True) as srv:
        status, _, err = post(srv.url, chat_body())
        assert status == 401 and err["error"]["code"] == "invalid_api_key"
        bad = {"Authorization": "Bearer nope"}
        assert get(srv.url, "/models", bad)[0] == 401
        good = {"Authorization": "Bearer sk-test"}
        status, _, models = get(srv.url, "/models", good)
        assert status == 200 and [m["id"] for m in models["data"]] == ["m1"]
        status, _, err = post(srv.url, chat_body(), headers=good)  # model "mock-model"
        assert status == 404
        assert err == {
            "error": {
                "message": "The model `mock-model` does not exist",
                "type": "invalid_request_error",
                "param": None,
                "code": "model_not_found",
            }
        }
        assert post(srv.url, {**chat_body(), "model": "m1"}, headers=good)[0] == 200
        assert post(srv.url, b"{not json", headers=good)[0] == 400
        assert post(srv.url, {"model": "m1"}, headers=good)[0] == 400  # no messages
        assert post(srv.url, {**chat_body(n=0), "model": "m1"}, headers=good)[0] == 400
        outcomes = [e["outcome"] for e in srv.requests]
    assert outcomes == ["401", "404", "ok", "400", "400", "400"]


def test_answers_mapping_uses_last_user_message() -> None:
    answers: dict[str | re.Pattern[str], str | Reply] = {
        "capital of France": "Paris",
        "re:^What is (\\d+)\\+\\1": "double",
        re.compile(r"seed please"): "seed={seed}",
    }
    with OpenAITestServer(answers=answers, answer="fallback") as srv:

        def ask(*texts: str, **extra: Any) -> str:
            messages = [{"role": "user", "content": t} for t in texts]
            body = {"model": "x", "messages": messages, **extra}
            return str(post(srv.url, body)[2]["choices"][0]["message"]["content"])

        assert ask("The capital of France?") == "Paris"
        assert ask("What is 3+3?") == "double"
        assert ask("What is 3+4?") == "fallback"
        assert ask("seed please", seed=9) == "seed=9"
        assert ask("capital of France", "something else") == "fallback"


def test_latency_is_per_request_not_per_choice() -> None:
    with OpenAITestServer(latency_ms=150) as srv:
        start = time.perf_counter()
        status, _, data = post(srv.url, chat_body(n=4))
        elapsed = time.perf_counter() - start
    assert status == 200 and len(data["choices"]) == 4
    assert elapsed >= 0.15
    assert 0.15 <= srv.requests[0]["latency"] < 4 * 0.15  # one latency, not one per choice


# -- multi-turn tool scripts -----------------------------------------------------------
CODE_TOOL = [{"type": "function", "function": {"name": "code_interpreter", "parameters": {}}}]


def _tool_script(protocol: str = "native") -> ScriptedToolModel:
    return ScriptedToolModel(
        [
            Reply(
                text="Let me compute.",
                tool_calls=[{"name": "code_interpreter", "arguments": {"code": "print(6*7)"}}],
            ),
            lambda obs, _body: f"The answer is \\boxed{{{(obs or '').strip()}}}.",
        ],
        protocol=protocol,
    )


def test_scripted_tool_model_native_tool_calls() -> None:
    with OpenAITestServer(script=_tool_script()) as srv:
        first = post(srv.url, chat_body("Compute 6*7", tools=CODE_TOOL))[2]
        choice = first["choices"][0]
        assert choice["finish_reason"] == "tool_calls"
        [call] = choice["message"]["tool_calls"]
        assert call["type"] == "function" and call["id"].startswith("call_")
        assert call["function"] == {
            "name": "code_interpreter",
            "arguments": json.dumps({"code": "print(6*7)"}),
        }
        assert choice["message"]["content"] == "Let me compute."
        messages = [
            {"role": "user", "content": "Compute 6*7"},
            {**choice["message"]},
            {"role": "tool", "tool_call_id": call["id"], "content": "42\n"},
        ]
        second = post(srv.url, {"model": "x", "messages": messages, "tools": CODE_TOOL})[2]
        assert second["choices"][0]["message"] == {
            "role": "assistant",
            "content": "The answer is \\boxed{42}.",
        }
        assert second["choices"][0]["finish_reason"] == "stop"
        # Turn past the end of the script: visible text, not a silent loop.
        messages += [second["choices"][0]["message"], {"role": "user", "content": "again"}]
        third = post(srv.url, {"model": "x", "messages": messages})[2]
        assert third["choices"][0]["message"]["content"] == "[ScriptedToolModel: no turn 2]"


RAW_CALL = (
    "<tool_call>\n<function=code_interpreter>\n<parameter=code>\nprint(1+1)\n"
    "</parameter>\n</function>\n</tool_call>"
)


def test_raw_text_tool_protocol() -> None:
    assert format_text_tool_call(ToolCall("code_interpreter", {"code": "print(1+1)"})) == RAW_CALL
    script = ScriptedToolModel(
        [
            Reply(tool_calls=[ToolCall("code_interpreter", {"code": "print(1+1)"})]),
            lambda obs, _body: f"got {obs}",
        ],
        protocol="text",
    )
    with OpenAITestServer(script=script) as srv:
        first = post(srv.url, chat_body("go", tools=CODE_TOOL))[2]["choices"][0]
        assert first["message"] == {"role": "assistant", "content": RAW_CALL}
        assert first["finish_reason"] == "stop"
        messages = [
            {"role": "user", "content": "go"},
            first["message"],
            {"role": "user", "content": "<tool_response>\n2\n</tool_response>"},
        ]
        second = post(srv.url, {"model": "x", "messages": messages})[2]["choices"][0]
        assert second["message"]["content"] == "got 2"
        # /v1/completions: turn chosen by counting tool-call blocks in the prompt.
        prompt = f"go{RAW_CALL}<tool_response>\n2\n</tool_response>"
        text = post(srv.url, {"prompt": prompt}, path="/completions")[2]["choices"][0]["text"]
        assert text == "got 2"


def test_native_call_without_declared_tool_falls_back_to_text() -> None:
    with OpenAITestServer(script=_tool_script()) as srv:
        choice = post(srv.url, chat_body("Compute"))[2]["choices"][0]
    assert "tool_calls" not in choice["message"] and choice["finish_reason"] == "stop"
    assert choice["message"]["content"] == "Let me compute.\n" + format_text_tool_call(
        ToolCall("code_interpreter", {"code": "print(6*7)"})
    )


def test_sequence_reply_differs_per_choice() -> None:
    with OpenAITestServer(script=lambda body: ["a", Reply(text="b")]) as srv:
        data = post(srv.url, chat_body(n=3))[2]
    assert [c["message"]["content"] for c in data["choices"]] == ["a", "b", "a"]


# -- faults ----------------------------------------------------------------------------
def _plan(kind: str) -> Callable[[FaultContext], str | None]:
    return lambda ctx: kind if ctx.attempt == 0 else None


@pytest.mark.parametrize("kind", ["429", "500", "503"])
def test_http_error_faults(kind: str) -> None:
    with OpenAITestServer(fault_plan=_plan(kind), retry_after="1") as srv:
        status, headers, err = post(srv.url, chat_body())
        assert status == int(kind) and "message" in err["error"]
        assert headers.get("Retry-After") == ("1" if kind == "429" else None)
        assert post(srv.url, chat_body())[0] == 200  # attempt 1 of the same key
        assert srv.attempts_by_key() == {request_key(chat_body()): [kind, "ok"]}


def test_reset_and_truncated_faults() -> None:
    with OpenAITestServer(fault_plan=lambda ctx: ctx.body["messages"][0]["content"]) as srv:
        with pytest.raises(aiohttp.ClientConnectionError):
            post(srv.url, chat_body("reset"))
        with pytest.raises(aiohttp.ClientPayloadError):
            post(srv.url, chat_body("truncated"))
        assert [e["outcome"] for e in srv.requests] == ["reset", "truncated"]
    # Without Content-Length the body simply ends early: a 200 with invalid JSON.
    with OpenAITestServer(fault_plan=_plan("truncated"), truncate_declares_length=False) as srv:
        with pytest.raises(json.JSONDecodeError):
            post(srv.url, chat_body())


def test_stall_times_out_client_and_frees_in_flight() -> None:
    with OpenAITestServer(fault_plan=_plan("stall"), stall_s=30.0) as srv:
        start = time.perf_counter()
        with pytest.raises(asyncio.TimeoutError):
            post(srv.url, chat_body(), timeout=0.3)
        assert time.perf_counter() - start < 10.0  # the client gave up long before the 30 s stall
        deadline = time.monotonic() + 2.0
        while srv.stats()["in_flight"] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert srv.stats()["in_flight"] == 0  # handler cancelled when the client hung up
        assert post(srv.url, chat_body())[0] == 200
        assert srv.attempts_by_key() == {request_key(chat_body()): ["stall", "ok"]}
    with OpenAITestServer(fault_plan=_plan("stall"), stall_s=0.2, stall_then="respond") as srv:
        assert post(srv.url, chat_body())[0] == 200
        assert srv.requests[0]["outcome"] == "stall" and srv.requests[0]["latency"] >= 0.2


def test_fail_first_k_attempts() -> None:
    with OpenAITestServer(fail_first_k_attempts_per_request=2, fail_first_k_kind="500") as srv:
        statuses = [post(srv.url, chat_body(seed=s))[0] for s in (1, 1, 2, 1, 2, 2)]
        assert statuses == [500, 500, 500, 200, 500, 200]
        assert srv.faults_before_success() == {
            request_key(chat_body(seed=1)): 2,
            request_key(chat_body(seed=2)): 2,
        }


def test_fault_draws_are_reproducible_and_seeded() -> None:
    def pattern(seed: int) -> list[str]:
        with OpenAITestServer(fault_rate=0.5, fault_seed=seed, fault_kinds={"500": 1}) as srv:
            for _ in range(16):
                post(srv.url, chat_body())
            return [e["outcome"] for e in srv.requests]

    first, again, other = pattern(7), pattern(7), pattern(8)
    assert first == again and first != other
    injector = FaultInjector(rate=0.5, mix={"500": 1}, seed=7)
    key = request_key(chat_body())
    expected = [injector.decide(key, a, "chat", chat_body()) or "ok" for a in range(16)]
    assert first == expected and 3 <= first.count("500") <= 13
    assert parse_fault_mix("429=2, 500,reset=0.5") == {"429": 2.0, "500": 1.0, "reset": 0.5}
    with pytest.raises(ValueError):
        parse_fault_mix("418")


async def _run_with_retries(url: str, problems: int, samples: int) -> dict[str, int]:
    """A tiny bounded retrying client: returns retries per request key."""
    retries: dict[str, int] = {}
    timeout = aiohttp.ClientTimeout(total=2.0)
    async with aiohttp.ClientSession(timeout=timeout) as session:

        async def one(problem: int, sample: int) -> None:
            body = chat_body(f"problem {problem}", seed=sample, temperature=0.7)
            key = request_key(body)
            for attempt in range(12):
                try:
                    async with session.post(url + "/chat/completions", json=body) as resp:
                        if resp.status == 200:
                            await resp.json()
                            retries[key] = attempt
                            return
                        await resp.read()
                except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
                    pass
            raise AssertionError(f"{key} never succeeded")

        jobs = [one(p, s) for p in range(problems) for s in range(samples)]
        await asyncio.gather(*jobs)
    return retries


def test_fault_rate_run_client_retries_match_server_log(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    cfg = ServerConfig(fault_rate=0.2, fault_seed=3, retry_after="0", latency_ms=5, log_path=log)
    with OpenAITestServer(cfg) as srv:
        client_retries = asyncio.run(_run_with_retries(srv.url, problems=30, samples=4))
        stats = srv.stats()
        assert client_retries == srv.faults_before_success()
        assert len(client_retries) == 120
        total_faults = sum(client_retries.values())
        assert stats["total_requests"] == 120 + total_faults
        assert stats["outcomes"]["ok"] == 120 and stats["unique_keys"] == 120
        assert 10 <= total_faults <= 60  # ~0.2/0.8 * 120 = 30 expected
        assert set(stats["outcomes"]) <= {"ok", "429", "500", "503", "reset", "truncated"}
        lines = [json.loads(x) for x in log.read_text().splitlines()]
        assert lines == srv.requests


# -- accounting, lifecycle, CLI ----------------------------------------------------------
def test_in_flight_mean_is_time_weighted() -> None:
    async def scenario(url: str) -> None:
        await asyncio.gather(*(_post(url, chat_body(seed=i)) for i in range(10)))
        await asyncio.sleep(0.2)  # an idle gap inside the span
        await _post(url, chat_body(seed=99))

    with OpenAITestServer(latency_ms=200) as srv:
        asyncio.run(scenario(srv.url))
        s = srv.stats()
    assert s["max_in_flight"] == 10 and s["in_flight"] == 0 and s["total_requests"] == 11
    # integral ~ 10 * 0.2 + 1 * 0.2 = 2.2 over a span of ~0.6 s; busy time ~0.4 s.
    assert s["mean_in_flight"] == pytest.approx(2.2 / s["span_s"], rel=0.1)
    assert 0.58 <= s["span_s"] < 0.9
    assert s["mean_in_flight_busy"] == pytest.approx(2.2 / s["busy_s"], rel=0.1)
    assert s["last_response"] - s["first_arrival"] == pytest.approx(s["span_s"], abs=1e-3)


def test_reset_clears_log_stats_and_attempts() -> None:
    with OpenAITestServer(fail_first_k_attempts_per_request=1) as srv:
        assert [post(srv.url, chat_body())[0] for _ in range(2)] == [503, 200]
        status, _, stats = get(srv.base_url, "/stats")
        assert status == 200 and stats["total_requests"] == 2
        assert stats["outcomes"] == {"503": 1, "ok": 1}
        assert post(srv.base_url, {}, path="/stats/reset")[2] == {"ok": True}
        assert srv.requests == [] and srv.stats()["max_in_flight"] == 0
        assert post(srv.url, chat_body())[0] == 503  # attempt counter restarted


def test_async_variant_inside_running_loop() -> None:
    async def scenario() -> dict[str, Any]:
        async with AsyncOpenAITestServer(latency_ms=20) as srv:
            results = await asyncio.gather(*(_post(srv.url, chat_body(seed=i)) for i in range(5)))
            assert [r[0] for r in results] == [200] * 5
            return srv.stats()

    stats = asyncio.run(scenario())
    assert stats["total_requests"] == 5 and stats["max_in_flight"] == 5


def _open_fds() -> int | None:
    fd_dir = Path("/proc/self/fd")
    return len(list(fd_dir.iterdir())) if fd_dir.exists() else None


def test_starts_fast_and_stops_clean() -> None:
    threads_before, fds_before = threading.active_count(), _open_fds()
    start = time.perf_counter()
    srv = OpenAITestServer().start()
    assert time.perf_counter() - start < 5.0  # starting never waits on anything
    port = srv.port
    assert srv.url == f"http://127.0.0.1:{port}/v1"
    assert post(srv.url, chat_body())[0] == 200
    srv.close()
    assert threading.active_count() == threads_before
    assert _open_fds() == fds_before  # listening and accepted sockets all closed
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass
    with pytest.raises(ValueError):
        ServerConfig(host="0.0.0.0")


def test_close_finishes_ordinary_requests_and_drops_stalls() -> None:
    srv = OpenAITestServer(latency_ms=300, fault_plan=lambda c: c.body["messages"][0]["content"])

    async def scenario() -> tuple[Result, BaseException | Result, float]:
        ordinary = asyncio.create_task(_post(srv.url, chat_body("ok")))
        stalled = asyncio.create_task(_post(srv.url, chat_body("stall"), timeout=10))
        await asyncio.sleep(0.1)
        start = time.perf_counter()
        await asyncio.to_thread(srv.close)
        took = time.perf_counter() - start
        stalled_result = (await asyncio.gather(stalled, return_exceptions=True))[0]
        return await ordinary, stalled_result, took

    srv.start()
    done, stalled, took = asyncio.run(scenario())
    assert done[0] == 200  # the in-flight ordinary request was allowed to finish
    assert isinstance(stalled, aiohttp.ClientConnectionError)
    assert took < 0.6  # stall_s is 30 s: it was not waited for
    assert sorted(e["outcome"] for e in srv.requests) == ["ok", "stall"]


def test_cli_process_roundtrip(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    proc, url = start_server_process(
        "--latency-ms",
        "10",
        "--fail-first-k",
        "1",
        "--fail-first-kind",
        "429",
        "--retry-after",
        "2",
        "--answer",
        "cli says {n}",
        "--log",
        str(log),
        "--no-n",
    )
    try:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", url)
        status, headers, _ = post(url, chat_body(n=2))
        assert status == 429 and headers["Retry-After"] == "2"
        _, _, data = post(url, chat_body(n=2))
        assert [c["message"]["content"] for c in data["choices"]] == ["cli says 1"]
        assert get_stats(url)["outcomes"] == {"429": 1, "ok": 1}
        reset_stats(url)
        assert get_stats(url)["total_requests"] == 0
        post(url, chat_body(seed=5))
    finally:
        stats = stop_server_process(proc)
    assert proc.returncode == 0
    assert stats["total_requests"] == 1 and stats["outcomes"] == {"429": 1}
    assert [json.loads(x)["outcome"] for x in log.read_text().splitlines()] == ["429", "ok", "429"]


def test_200_concurrent_requests_are_all_in_flight_at_once() -> None:
    """200 concurrent requests at 200 ms: the server holds all 200 at once and serves them
    all. (How fast is a benchmark's question, not a test's: the printed wall times are for
    reading; this shared machine is too noisy for timed assertions.)"""
    proc, url = start_server_process("--latency-ms", "200")

    async def bursts() -> list[tuple[float, list[int], dict[str, Any]]]:
        results = []
        connector = aiohttp.TCPConnector(limit=256)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def one(i: int) -> int:
                async with session.post(url + "/chat/completions", json=chat_body(seed=i)) as r:
                    await r.json()
                    return r.status

            for _ in ("cold", "warm"):
                start = time.perf_counter()
                statuses = await asyncio.gather(*(one(i) for i in range(200)))
                elapsed = time.perf_counter() - start
                results.append((elapsed, statuses, await asyncio.to_thread(get_stats, url)))
                await asyncio.to_thread(reset_stats, url)
        return results

    try:
        results = asyncio.run(bursts())
    finally:
        stop_server_process(proc)
    for label, (elapsed, statuses, stats) in zip(("cold", "warm"), results, strict=True):
        print(
            f"\n200 x 200 ms ({label}): wall {elapsed:.3f} s, server span "
            f"{stats['span_s']:.3f} s, max in-flight {stats['max_in_flight']}, "
            f"mean in-flight {stats['mean_in_flight']:.1f}"
        )
        assert statuses == [200] * 200
        assert stats["max_in_flight"] == 200 and stats["outcomes"] == {"ok": 200}
