"""The generation cache keeps a completion's reasoning: a hit comes back split as the
reply was, an entry stored before completions carried reasoning is split as it is read,
and the key changes only where the split or the prompt does (existing keys stay)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pytest_agenteval.models import OpenAISampler, RetryPolicy, SamplingParams
from pytest_agenteval.models.cache import CachingSampler, GenerationCache
from pytest_agenteval.models.reasoning import ThinkSplit
from pytest_agenteval.testing import OpenAITestServer, ServerConfig, think_reply

MESSAGES = [{"role": "user", "content": "What is 2+2?"}]
PARAMS = SamplingParams(temperature=0.6, top_p=0.95, top_k=-1, max_tokens=64, seed=7)
REPLY = think_reply("2+2 is 4, so", " \\boxed{4}")
FIELDS = ("text", "reasoning", "reasoning_closed", "reasoning_tokens", "reasoning_tokens_estimated")


def _fields(completion) -> tuple:
    return tuple(getattr(completion, name) for name in FIELDS)


def _run(server: OpenAITestServer, folder: Path, think: ThinkSplit | None = None, n: int = 0) -> list:
    async def go() -> list:
        inner = OpenAISampler([server.url], "mock-model", retry=RetryPolicy(max_attempts=1), think=think)
        sampler = CachingSampler(inner, GenerationCache(folder))
        try:
            if n:
                return await sampler.complete_n(MESSAGES, PARAMS, n)
            return [await sampler.complete(MESSAGES, PARAMS)]
        finally:
            await sampler.aclose()

    return asyncio.run(go())


def test_a_hit_comes_back_with_its_reasoning(tmp_path: Path) -> None:
    config = ServerConfig(
        answers={"2+2": REPLY}, reasoning_parser="deepseek_r1", report_reasoning_tokens=True
    )
    with OpenAITestServer(config) as server:
        (fresh,) = _run(server, tmp_path)
        (hit,) = _run(server, tmp_path)
        pair = _run(server, tmp_path, n=2), _run(server, tmp_path, n=2)
        sent = len(server.requests)
    assert _fields(fresh) == _fields(hit) == (" \\boxed{4}", "2+2 is 4, so", True, 3, False)
    assert (fresh.cached, hit.cached, sent) == (False, True, 2)
    assert [_fields(c) for c in pair[0]] == [_fields(c) for c in pair[1]]
    assert [c.reasoning for c in pair[1]] == ["2+2 is 4, so"] * 2 and pair[1][0].cached


def test_an_entry_stored_before_reasoning_is_split_as_it_is_read(tmp_path: Path) -> None:
    with OpenAITestServer(ServerConfig()) as server:
        inner = OpenAISampler([server.url], "mock-model")
        cache = GenerationCache(tmp_path)
        key = CachingSampler(inner, cache).chat_key(MESSAGES, PARAMS)
        # what an older version stored: the raw reply, no reasoning fields at all
        cache.put(
            key, {"text": REPLY.text, "finish_reason": "stop", "prompt_tokens": 9, "completion_tokens": 8}
        )
        cache.close()
        (old,) = _run(server, tmp_path)
        sent = len(server.requests)
    assert sent == 0 and old.cached
    assert _fields(old) == (" \\boxed{4}", "2+2 is 4, so", True, 4, True)  # 8 tokens * 12/22, estimated


def test_the_key_changes_only_with_the_split() -> None:
    cache = GenerationCache.__new__(GenerationCache)  # completion_key reads nothing of the folder

    def key(think: ThinkSplit | None) -> str:
        inner = OpenAISampler(["http://127.0.0.1:9/v1"], "m", think=think)
        return CachingSampler(inner, cache).chat_key(MESSAGES, PARAMS)

    plain = key(None)
    assert key(ThinkSplit()) == plain == key(ThinkSplit(("<think>", "</think>")))  # existing keys stay
    assert key(ThinkSplit(thinking="on")) == plain  # an endpoint's --thinking is in its body already
    assert len({plain, key(ThinkSplit(("[T]", "[/T]"))), key(ThinkSplit(("<a>", "</a>")))}) == 3


def test_a_batchs_raw_answer_is_stored_split(tmp_path: Path) -> None:
    from pytest_agenteval.models.http.replies import parse_completions

    body = {  # a server without a reasoning parser: the tags are in the content
        "choices": [{"index": 0, "message": {"content": "<think>2+2 is 4, so</think> \\boxed{4}"}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 13},
    }
    with OpenAITestServer(ServerConfig()) as server:
        sampler = CachingSampler(OpenAISampler([server.url], "mock-model"), GenerationCache(tmp_path))
        sampler.store(sampler.chat_key(MESSAGES, PARAMS), parse_completions(body, 0.0, 1), None, "batch-1")
        sampler.cache.close()
        (stored,) = _run(server, tmp_path)
        sent = len(server.requests)
    assert sent == 0 and _fields(stored) == (" \\boxed{4}", "2+2 is 4, so", True, 7, True)  # 13 * 12/22
