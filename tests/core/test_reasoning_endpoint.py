"""Endpoints and launched servers: every shape a server gives a reasoning model's reply
(think tags in the content, vLLM's deepseek_r1 and qwen3 parsers, `reasoning_content` or
`reasoning`, streamed or not, one sample or n) comes back as a Completion whose `text`
is the answer only, over real sockets to the package's test server."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_agenteval.api.sampler import Completion
from pytest_agenteval.models import OpenAISampler, RetryPolicy, SamplingParams
from pytest_agenteval.models.reasoning import ThinkSplit
from pytest_agenteval.testing import OpenAITestServer, ServerConfig, parse_reasoning, think_reply

MESSAGES = [{"role": "user", "content": "What is 2+2?"}]
PARAMS = SamplingParams(temperature=0.6, top_p=0.95, top_k=-1, max_tokens=64, seed=7)
SHORT = dataclasses.replace(PARAMS, max_tokens=16)  # 64 characters: cut inside the thoughts
THOUGHTS, ANSWER = "2+2 is 4, so", " The answer is \\boxed{4}."  # 12 and 25 characters
LONG = "x" * 400
FIELDS = ("reasoning", "reasoning_closed", "reasoning_tokens", "reasoning_tokens_estimated")


def fields(completion: Completion) -> tuple:
    return (completion.text, completion.finish_reason, *(getattr(completion, f) for f in FIELDS))


async def ask(
    config: ServerConfig, *, stream: bool, params: SamplingParams = PARAMS, think=None
) -> Completion:
    with OpenAITestServer(config) as server:
        backend = OpenAISampler(
            [server.url], "mock-model", stream=stream, retry=RetryPolicy(max_attempts=1), think=think
        )
        try:
            return await backend.complete(MESSAGES, params)
        finally:
            await backend.aclose()


# the reply is "<think>2+2 is 4, so</think> The answer is \boxed{4}." (52 characters: 13 tokens
# on the test server); without a reported count, 13 * 12/37 of them are the reasoning's: 4
CLOSED = (ANSWER, "stop", THOUGHTS, True, 4, True)
# cut at 16 tokens (64 characters) inside the thoughts: all 16 tokens are reasoning, exactly
UNCLOSED = ("", "length", "x" * 57, False, 16, False)


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True], ids=["no-stream", "stream"])
@pytest.mark.parametrize(
    ("server", "reply", "params", "expected"),
    [
        ({}, think_reply(THOUGHTS, ANSWER), PARAMS, CLOSED),
        ({"reasoning_parser": "deepseek_r1"}, think_reply(THOUGHTS, ANSWER), PARAMS, CLOSED),
        ({"reasoning_parser": "qwen3"}, think_reply(THOUGHTS, ANSWER), PARAMS, CLOSED),
        (
            {"reasoning_parser": "deepseek_r1", "reasoning_field": "reasoning"},
            think_reply(THOUGHTS, ANSWER),
            PARAMS,
            CLOSED,
        ),
        (
            {"reasoning_parser": "qwen3", "report_reasoning_tokens": True},
            think_reply(THOUGHTS, ANSWER),
            PARAMS,
            (ANSWER, "stop", THOUGHTS, True, 3, False),  # the server's count: 12 characters, 3 tokens
        ),
        ({}, think_reply(THOUGHTS, ANSWER, opened=False), PARAMS, CLOSED),  # the prompt opened it
        ({"reasoning_parser": "qwen3"}, think_reply(THOUGHTS, ANSWER, opened=False), PARAMS, CLOSED),
        ({}, think_reply(LONG), SHORT, UNCLOSED),
        ({"reasoning_parser": "deepseek_r1"}, think_reply(LONG), SHORT, UNCLOSED),  # content null
        ({"reasoning_parser": "qwen3"}, think_reply(LONG), SHORT, UNCLOSED),  # <think> left in content
        (
            {},
            think_reply("I guess \\boxed{3}", " no: \\boxed{4}"),
            PARAMS,
            (" no: \\boxed{4}", "stop", "I guess \\boxed{3}", True, 7, True),  # 46 chars: 12 tokens * 17/31
        ),
        (
            {},
            "The answer is \\boxed{4}.",
            PARAMS,
            ("The answer is \\boxed{4}.", "stop", None, True, 0, False),
        ),
    ],
    ids=[
        "tags-in-content",
        "deepseek_r1",
        "qwen3",
        "deepseek_r1-reasoning-field",
        "qwen3-reported-tokens",
        "close-tag-only",
        "qwen3-close-tag-only",
        "unclosed-tags-in-content",
        "unclosed-deepseek_r1",
        "unclosed-qwen3",
        "boxed-inside-and-outside",
        "no-reasoning",
    ],
)
async def test_every_server_shape_gives_the_answer_alone(server, reply, params, expected, stream) -> None:
    config = ServerConfig(answers={"2+2": reply}, **server)
    assert fields(await ask(config, stream=stream, params=params)) == expected


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True], ids=["no-stream", "stream"])
async def test_thinking_on_cut_off_without_tags_is_unclosed_reasoning(stream: bool) -> None:
    config = ServerConfig(answer=LONG)
    on = await ask(config, stream=stream, params=SHORT, think=ThinkSplit(thinking="on"))
    off = await ask(config, stream=stream, params=SHORT)
    assert fields(on) == ("", "length", "x" * 64, False, 16, False)
    assert fields(off) == ("x" * 64, "length", None, True, 0, False)


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True], ids=["no-stream", "stream"])
async def test_custom_tags(stream: bool) -> None:
    reply = think_reply(THOUGHTS, ANSWER, tags=("<seed:think>", "</seed:think>"))
    think = ThinkSplit(tags=("<seed:think>", "</seed:think>"))
    completion = await ask(ServerConfig(answers={"2+2": reply}), stream=stream, think=think)
    assert (completion.text, completion.reasoning, completion.reasoning_closed) == (ANSWER, THOUGHTS, True)


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True], ids=["no-stream", "stream"])
@pytest.mark.parametrize("parser", ["none", "deepseek_r1", "qwen3"])
async def test_n_samples_each_split(parser: str, stream: bool) -> None:
    replies = [think_reply(THOUGHTS, ANSWER), think_reply(LONG)]
    config = ServerConfig(script=lambda body: replies, reasoning_parser=parser)
    with OpenAITestServer(config) as server:
        backend = OpenAISampler([server.url], "mock-model", stream=stream, retry=RetryPolicy(max_attempts=1))
        try:
            first, second = await backend.complete_n(MESSAGES, SHORT, 2)
        finally:
            await backend.aclose()
    # one usage for the request: a sample's own tokens are unknown, so are its reasoning's
    assert fields(first) == (ANSWER, "stop", THOUGHTS, True, None, False)
    assert fields(second) == ("", "length", "x" * 57, False, None, False)


@pytest.mark.parametrize(
    ("text", "parser", "expected"),
    [
        ("<think>a</think>b", "deepseek_r1", ("a", "b")),
        ("a</think>b", "deepseek_r1", ("a", "b")),
        ("<think>a", "deepseek_r1", ("a", None)),
        ("<think>a</think>", "deepseek_r1", ("a", None)),
        ("<think>a</think>b", "qwen3", ("a", "b")),
        ("a</think>b", "qwen3", (None, "a</think>b")),
        ("<think>a", "qwen3", (None, "<think>a")),
        ("<think>a</think>b", "none", (None, "<think>a</think>b")),
    ],
)
def test_the_test_servers_parsers_split_as_vllms_do(text: str, parser: str, expected: tuple) -> None:
    assert parse_reasoning(text, parser) == expected


def test_a_parser_the_test_server_does_not_know_is_refused() -> None:
    with pytest.raises(ValueError, match="reasoning_parser must be one of"):
        ServerConfig(reasoning_parser="r1")
