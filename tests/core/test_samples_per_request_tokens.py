"""`--samples-per-request K`: one request, K samples, one usage (as real servers report
it). Each sample records its own completion tokens where the reply says them (token ids,
logprobs), else null; the request's usage is kept once, on its first sample
(`request_usage`), and the run's totals are exactly the sum of the requests' usage.
Before, the first sample recorded the whole request's usage and the others 0."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from pytest_agenteval.models.http.replies import parse_completions
from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import read_results

# choice i of a request gets TEXTS[i % 3]: 10, 17 and 34 characters, 4 to a token rounded up
TEXTS = ["\\boxed{70}", "It is \\boxed{70}.", "So the answer is \\boxed{70}, done."]
PROMPT = 26  # the server's count of each tiny AIME prompt used here ("What is 30 + 40?" ...)
REQUEST = {"prompt_tokens": PROMPT, "completion_tokens": 3 + 5 + 9}
GROUP = [  # val-n 4, K 3: samples 0-2 in one request (n=3), sample 3 alone (n=1)
    {"prompt_tokens": PROMPT, "completion_tokens": None, "request_usage": REQUEST},
    {"prompt_tokens": PROMPT, "completion_tokens": None, "request_usage": {}},
    {"prompt_tokens": PROMPT, "completion_tokens": None, "request_usage": {}},
    {"prompt_tokens": PROMPT, "completion_tokens": 3},  # a request of its own: its own usage
]


def token_fields(generation: dict[str, Any]) -> dict[str, Any]:
    return {
        k: generation[k] for k in ("prompt_tokens", "completion_tokens", "request_usage") if k in generation
    }


def test_the_test_server_reports_one_usage_per_request() -> None:
    body = {"model": "mock-model", "messages": [{"role": "user", "content": "What is 30 + 40?"}], "n": 3}
    with OpenAITestServer(ServerConfig(script=lambda body: TEXTS)) as server:
        request = urllib.request.Request(
            f"{server.url}/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            reply = json.loads(response.read())
    assert [c["message"]["content"] for c in reply["choices"]] == TEXTS
    assert ["usage" in c for c in reply["choices"]] == [False, False, False]
    assert reply["usage"] == {"prompt_tokens": 8, "completion_tokens": 17, "total_tokens": 25}


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["no-xdist", "xdist"])
def test_k_samples_of_one_request_record_null_and_the_request_usage_once(
    run_suite, aime_suite: pytest.Pytester, workers: tuple[str, ...]
) -> None:
    cache = f"--agenteval-cache-dir={aime_suite.path / 'cache'}"
    args = ("--val-n=4", "--samples-per-request=3", "--limit=2", cache, *workers)
    with OpenAITestServer(ServerConfig(script=lambda body: TEXTS)) as server:
        result, out = run_suite(f"--endpoint={server.url}", *args)
        requests = [entry["n"] for entry in server.requests]
        again, out_again = run_suite(f"--endpoint={server.url}", *args, out="again.jsonl")
        requests_again = len(server.requests)
    assert (result.ret, again.ret) == (1, 1), result.stdout.str()  # problem 1's answer is not 70
    assert sorted(requests) == [1, 1, 3, 3] and requests_again == 4  # the rerun: all from the cache
    for path in (out, out_again):
        problems, (summary,) = read_results(path)
        assert [[token_fields(g) for g in p["generations"]] for p in problems] == [GROUP, GROUP]
        # the sum of the 4 requests' usage: (26 + 26) and (17 + 3) per problem
        assert summary["tokens"] == {"prompt": 4 * PROMPT, "completion": 2 * (17 + 3)}


def choice(**fields: Any) -> dict[str, Any]:
    return {"index": fields.pop("index", 0), "finish_reason": "stop", "message": {"content": "x"}, **fields}


USAGE = {"prompt_tokens": 11, "completion_tokens": 9}


@pytest.mark.parametrize(
    ("choices", "own", "request_usage"),
    [
        ([choice()], [9], [None]),  # one choice: the usage is its own
        ([choice(index=i) for i in range(3)], [None] * 3, [USAGE, {}, {}]),
        (  # vLLM return_token_ids: each choice's sampled ids
            [choice(index=0, token_ids=[1, 2, 3, 4]), choice(index=1, token_ids=[5] * 5)],
            [4, 5],
            [USAGE, {}],
        ),
        (  # chat logprobs: one entry a token
            [
                choice(index=1, logprobs={"content": [{}] * 6}),
                choice(index=0, logprobs={"content": [{}] * 3}),
            ],
            [3, 6],
            [USAGE, {}],
        ),
        (  # /v1/completions logprobs
            [choice(index=0, logprobs={"tokens": ["a", "b"]}), choice(index=1, logprobs=None)],
            [2, None],
            [USAGE, {}],
        ),
    ],
    ids=["one", "unknown", "token-ids", "chat-logprobs", "completions-logprobs"],
)
def test_each_choice_records_its_own_count_where_the_reply_says_it(
    choices: list[dict[str, Any]], own: list[int | None], request_usage: list[Any]
) -> None:
    completions = parse_completions({"choices": choices, "usage": USAGE}, 0.5, 2)
    assert [c.completion_tokens for c in completions] == own
    assert [c.prompt_tokens for c in completions] == [11] * len(choices)
    assert [c.request_usage for c in completions] == request_usage
    assert [c.attempts for c in completions] == [2] + [0] * (len(choices) - 1)
