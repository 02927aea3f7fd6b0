"""Each generation's cost in its results line (table-driven, exact values), and the cached
prompt tokens read from a reply's usage."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_agenteval.api.sampler import Completion, note_served, served_by
from pytest_agenteval.models.cost.prices import Price
from pytest_agenteval.models.http.replies import cached_prompt_tokens, parse_completions
from pytest_agenteval.output.cost import budget_line, price_generation

PRICES = {
    "run": Price("run", input=1.0, output=2.0, cached_input=0.5),
    "served-as": Price("served-as", input=10.0, output=10.0),
    "judge-a": Price("judge-a", input=3.0, output=4.0),
}


@pytest.mark.parametrize(
    ("generation", "run_name", "devices", "added"),
    [
        # a billed model: its own prompt and completion tokens at its price
        ({"prompt_tokens": 1000, "completion_tokens": 500}, "run", None, {"cost_usd": 0.002}),
        # cached prompt tokens (part of the prompt) at the cached-input price
        (
            {"prompt_tokens": 1000, "completion_tokens": 500, "cached_prompt_tokens": 600},
            "run",
            None,
            {"cost_usd": 0.0017},
        ),
        # the first of n samples of one request carries the request's usage; the others none
        (
            {
                "prompt_tokens": 100,
                "completion_tokens": None,
                "request_usage": {
                    "prompt_tokens": 100,
                    "completion_tokens": 300,
                    "cached_prompt_tokens": 100,
                },
            },
            "run",
            None,
            {"cost_usd": 0.00065},
        ),
        (
            {"prompt_tokens": 100, "completion_tokens": None, "request_usage": {}},
            "run",
            None,
            {"cost_usd": 0.0},
        ),
        # no price under the run's name: the reply's model, else None (unpriced)
        (
            {"prompt_tokens": 1000, "completion_tokens": 0, "reply_model": "served-as"},
            "unknown",
            None,
            {"cost_usd": 0.01},
        ),
        ({"prompt_tokens": 1000, "completion_tokens": 0}, "unknown", None, {"cost_usd": None}),
        # a model the run runs: device seconds, its latency x the devices
        ({"prompt_tokens": 10, "completion_tokens": 5, "latency_s": 1.25}, None, 1, {"device_seconds": 1.25}),
        ({"prompt_tokens": 10, "completion_tokens": 5, "latency_s": 1.25}, None, 8, {"device_seconds": 10.0}),
        # replay: neither
        ({"prompt_tokens": 10, "completion_tokens": 5}, None, None, {}),
    ],
)
def test_each_generation_records_its_cost(
    generation: dict[str, Any], run_name: str | None, devices: int | None, added: dict[str, Any]
) -> None:
    line = dict(generation)
    price_generation(line, PRICES, run_name, devices)
    assert line == {**generation, **added}


def test_a_datagen_item_prices_each_judge_call_by_its_judge_and_sums_them() -> None:
    line: dict[str, Any] = {
        "prompt_tokens": 3000,
        "completion_tokens": 300,
        "judgments": [
            {"judge": "judge-a", "model": "judge-a", "prompt_tokens": 1000, "completion_tokens": 100},
            {"judge": "judge-a#2", "model": "judge-a", "prompt_tokens": 1000, "completion_tokens": 100},
            {"judge": "run-model", "prompt_tokens": 1000, "completion_tokens": 100},  # the run's model
        ],
    }
    price_generation(line, PRICES, "run", None)
    assert [j["cost_usd"] for j in line["judgments"]] == [0.0034, 0.0034, 0.0012]
    assert line["cost_usd"] == 0.008


def test_a_datagen_item_with_an_unpriced_judge_has_no_total() -> None:
    line: dict[str, Any] = {
        "judgments": [{"judge": "x", "model": "x", "prompt_tokens": 1, "completion_tokens": 1}]
    }
    price_generation(line, PRICES, None, 1)
    assert line["judgments"][0]["cost_usd"] is None and line["cost_usd"] is None
    assert "device_seconds" not in line


@pytest.mark.parametrize(
    ("usage", "cached"),
    [
        ({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 6}}, 6),
        ({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 0}}, 0),
        ({"prompt_tokens": 10, "prompt_tokens_details": None}, 0),
        ({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": "6"}}, 0),
        ({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": True}}, 0),
        ({"prompt_tokens": 10}, 0),
    ],
)
def test_cached_prompt_tokens_come_from_the_replys_usage(usage: dict, cached: int) -> None:
    assert cached_prompt_tokens(usage) == cached


def _reply(n: int) -> dict[str, Any]:
    return {
        "choices": [{"index": i, "message": {"content": f"t{i}"}, "finish_reason": "stop"} for i in range(n)],
        "usage": {
            "prompt_tokens": 40,
            "completion_tokens": 8,
            "prompt_tokens_details": {"cached_tokens": 32},
        },
    }


def test_a_single_reply_carries_its_cached_tokens_and_n_replies_carry_them_once() -> None:
    (single,) = parse_completions(_reply(1), 0.1, 1)
    assert single.cached_prompt_tokens == 32 and single.request_usage is None
    first, second = parse_completions(_reply(2), 0.1, 1)
    assert first.request_usage == {"prompt_tokens": 40, "completion_tokens": 8, "cached_prompt_tokens": 32}
    assert second.request_usage == {} and (first.cached_prompt_tokens, second.cached_prompt_tokens) == (0, 0)


def test_a_rollouts_cached_tokens_are_summed_over_its_turns() -> None:
    served_by.set({})
    for cached in (0, 30, 50):
        note_served(Completion("t", "stop", prompt_tokens=60, cached_prompt_tokens=cached, model="m"))
    note_served(Completion("t", "stop", cached_prompt_tokens=99, request_usage={}))  # one of n: not here
    assert served_by.get() == {"reply_model": "m", "cached_prompt_tokens": 80}


@pytest.mark.parametrize(
    ("budgets", "line"),
    [
        ([], None),
        ([{"stopped": False, "stopped_problem_ids": []}], None),
        (
            [
                {"stopped": True, "stopped_problem_ids": [3, 4], "max_cost_usd": 0.5, "spent_usd": 0.4999},
                {"stopped": True, "stopped_problem_ids": ["x"], "max_cost_usd": 0.5, "spent_usd": 0.4999},
            ],
            "budget: stopped after $0.499900 of $0.500000; 3 items not run; raise --max-cost to go on",
        ),
        (
            [
                {
                    "stopped": True,
                    "stopped_problem_ids": [1],
                    "max_cost_usd": None,
                    "spent_tokens": 980,
                    "max_total_tokens": 1000,
                }
            ],
            "budget: stopped after 980 of 1000 tokens; 1 items not run; raise --max-total-tokens to go on",
        ),  # fmt: skip
        # a shard of a --budget-ledger: the ledger's total against the one budget, its own beside
        # (before: 'stopped after $1.250000 of $5.000000', the shard's share)
        (
            [
                {
                    "stopped": True, "stopped_problem_ids": [7], "max_cost_usd": 5.0, "spent_usd": 1.25,
                    "ledger": {"path": "/nfs/b.json", "spent_usd": 4.98, "spent_tokens": 0},
                }
            ],
            "budget: stopped after $4.980000 of $5.000000 (all shards on --budget-ledger /nfs/b.json; "
            "this one $1.250000); 1 items not run; raise --max-cost to go on",
        ),
        (
            [
                {
                    "stopped": True, "stopped_problem_ids": [7, 8], "max_cost_usd": None, "spent_tokens": 300,
                    "max_total_tokens": 1000,
                    "ledger": {"path": "/nfs/b.json", "spent_usd": 0.0, "spent_tokens": 990},
                }
            ],
            "budget: stopped after 990 of 1000 tokens (all shards on --budget-ledger /nfs/b.json; "
            "this one 300 tokens); 2 items not run; raise --max-total-tokens to go on",
        ),
    ],
)  # fmt: skip
def test_the_budget_line(budgets: list, line: str | None) -> None:
    assert budget_line([{"suite": "s", "budget": b} for b in budgets]) == line
