"""The in-process judge held to the verdict schema by a llama.cpp grammar
(`SamplingParams.json_schema`), and the same field on the OpenAI wire. The model is the
real embedded SmolLM2-135M; the endpoint is the real-socket test server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from pytest_agenteval.api.sampler import SamplingParams
from pytest_agenteval.models import OpenAISampler
from pytest_agenteval.tasks.datagen._prompts import (
    GRAMMAR_REASON_CHARS,
    grammar_max_tokens,
    grammar_schema,
    pairwise_messages,
    pointwise_messages,
)
from pytest_agenteval.tasks.datagen._verdict import DIMENSIONS, parse_reply
from pytest_agenteval.testing import OpenAITestServer, ServerConfig

NONCE = "0123456789abcdef"
PROBLEM = {"problem": "Find $x$ with \\frac{x}{3} = 10.", "answer": "30", "solution": "x = 30."}
REFERENCE = {"problem": "How many divisors has 12?", "answer": "6", "solution": "1, 2, 3, 4, 6, 12."}
MESSAGES = {
    "pointwise": pointwise_messages(PROBLEM["problem"], PROBLEM["answer"], PROBLEM["solution"], NONCE),
    "pairwise": pairwise_messages(PROBLEM, REFERENCE, NONCE),
}


def longest_reply(kind: str) -> str:
    """The longest text the grammar allows: every reason full, a space at every slot."""
    reason = "~" * GRAMMAR_REASON_CHARS
    if kind == "pointwise":
        fields = [f' "nonce" : "{NONCE}" '] + [
            f' "{dim}" : {{ "reason" : "{reason}" , "score" : 5 }} ' for dim in DIMENSIONS
        ]
    else:
        fields = [f' "nonce" : "{NONCE}" ', f' "reason" : "{reason}" ', ' "verdict" : "B>>A" ']
    return "{" + ",".join(fields) + "} "


@pytest.mark.parametrize(("kind", "budget"), [("pointwise", 501), ("pairwise", 136)])
def test_the_budget_covers_the_longest_reply_the_schema_allows(kind: str, budget: int) -> None:
    reply = longest_reply(kind)
    assert grammar_max_tokens(kind) == budget
    assert len(reply.encode()) <= budget - 1  # ASCII: bytes >= tokens; one more for the end token
    assert parse_reply(reply, NONCE, kind).ok


def test_the_grammar_schema_pins_the_nonce_and_bounds_each_reason() -> None:
    pairwise = grammar_schema("pairwise", NONCE)
    assert pairwise["properties"]["nonce"] == {"type": "string", "enum": [NONCE]}
    assert pairwise["properties"]["reason"] == {"type": "string", "pattern": "^[ !#-\\[\\]-~]{0,64}$"}
    pointwise = grammar_schema("pointwise", NONCE)
    assert [pointwise["properties"][d]["properties"]["reason"]["pattern"] for d in DIMENSIONS] == [
        "^[ !#-\\[\\]-~]{0,64}$"
    ] * 4


def test_params_without_a_schema_keep_the_fields_of_every_cache_key() -> None:
    plain = SamplingParams(0.0, 1.0, 0, 64, 7)
    assert plain.as_dict() == {
        "temperature": 0.0,
        "top_p": 1.0,
        "top_k": 0,
        "max_tokens": 64,
        "seed": 7,
        "stop": [],
    }
    held = SamplingParams(0.0, 1.0, 0, 64, 7, json_schema='{"type": "object"}')
    assert held.as_dict()["json_schema"] == '{"type": "object"}'
    assert SamplingParams(**{**held.as_dict(), "stop": ()}) == held  # a re-ask rebuilds it whole


@pytest.fixture(scope="module")
def embedded() -> Iterator[Any]:
    """The embedded SmolLM2, loaded once for both kinds: each call evaluates its prompt with
    the grammar of its own request, whatever the call before it was."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (the embedded model)")
    from pytest_agenteval.models import LlamaSampler, embedded_model_path

    sampler = LlamaSampler(embedded_model_path(), embedded=True, n_ctx=2048)
    yield sampler
    asyncio.run(sampler.aclose())


@pytest.mark.parametrize("kind", ["pointwise", "pairwise"])
def test_the_embedded_model_under_the_grammar_writes_a_verdict_that_parses(embedded: Any, kind: str) -> None:
    """In prompt mode SmolLM2-135M never wrote the object (valid_rate 0.00); held to the
    schema it always does, and stops by itself within the budget."""
    params = SamplingParams(
        0.0, 1.0, 0, grammar_max_tokens(kind), 11, json_schema=json.dumps(grammar_schema(kind, NONCE))
    )
    completion = asyncio.run(embedded.complete(MESSAGES[kind], params))
    parsed = parse_reply(completion.text, NONCE, kind)
    assert (parsed.ok, parsed.error, completion.finish_reason) == (True, "", "stop")
    assert completion.completion_tokens <= grammar_max_tokens(kind)


def test_the_openai_sampler_sends_the_schema_as_a_json_schema_response_format() -> None:
    schema = grammar_schema("pairwise", NONCE)
    params = SamplingParams(0.0, 1.0, 0, 32, 3, json_schema=json.dumps(schema))
    with OpenAITestServer(ServerConfig(answer="{}", log_bodies=True)) as server:
        sampler = OpenAISampler([server.url], "mock-model")

        async def ask() -> None:
            try:
                await sampler.complete(MESSAGES["pairwise"], params)
            finally:
                await sampler.aclose()

        asyncio.run(ask())
        (logged,) = server.requests
    assert logged["body"]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "reply", "strict": True, "schema": schema},
    }
    own = {"type": "json_object"}  # a response_format the caller set itself is kept
    body = OpenAISampler(["http://x/v1"], "m", extra_body={"response_format": own}).body(
        MESSAGES["pairwise"], params
    )
    assert body["response_format"] == own
