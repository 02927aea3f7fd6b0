"""Batch prices and the one format of USD amounts (table-driven, exact values)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_agenteval.models.cost.prices import Price, format_usd, parse_prices
from pytest_agenteval.output.cost import cost_lines, price_generation

LIVE = Price("run", input=1.0, output=2.0, cached_input=0.5)
WITH_BATCH = Price("run", input=1.0, output=2.0, batch_input=0.3, batch_output=0.7)


@pytest.mark.parametrize(
    ("amount", "printed"),
    [
        (0.0, "$0.000000"),
        (6e-05, "$0.000060"),
        (5e-05, "$0.000050"),
        (0.000014, "$0.000014"),
        (0.0000004, "<$0.000001"),
        (0.0000005, "<$0.000001"),
        (0.0000006, "$0.000001"),
        (0.4999, "$0.499900"),
        (5.0, "$5.000000"),
        (1234.5, "$1234.500000"),
    ],
)
def test_usd_amounts_print_in_one_fixed_format(amount: float, printed: str) -> None:
    assert format_usd(amount) == printed


@pytest.mark.parametrize(
    ("price", "tokens", "usd"),
    [
        # no batch prices: half the live ones, cached prompt tokens at half the cached price
        (LIVE, (1000, 500, 0), 0.001),
        (LIVE, (1000, 500, 600), 0.00085),
        # the prices file's batch prices
        (WITH_BATCH, (1000, 500, 0), 0.00065),
    ],
)
def test_the_batch_price(price: Price, tokens: tuple[int, int, int], usd: float) -> None:
    assert price.batch_price().cost(*tokens) == usd


@pytest.mark.parametrize(
    ("generation", "cost"),
    [
        ({"prompt_tokens": 1000, "completion_tokens": 500}, 0.002),  # live
        ({"prompt_tokens": 1000, "completion_tokens": 500, "via": "batch", "batch_id": "b1"}, 0.001),
        ({"prompt_tokens": 1000, "completion_tokens": 500, "batch_id": "b1", "cached": True}, 0.001),
    ],
)
def test_a_generation_a_batch_answered_is_billed_at_the_batch_price(
    generation: dict[str, Any], cost: float
) -> None:
    line = dict(generation)
    price_generation(line, {"run": LIVE}, "run", None)
    assert line == {**generation, "cost_usd": cost}


def test_a_prices_file_gives_batch_prices() -> None:
    prices = parse_prices('[models."m"]\ninput = 1\noutput = 2\nbatch_input = 0.4\nbatch_output = 0.9\n', "p")
    assert (prices["m"].batch_input, prices["m"].batch_output) == (0.4, 0.9)
    assert prices["m"].as_dict()["batch_output"] == 0.9


@pytest.mark.parametrize(
    ("block", "line"),
    [
        (
            {"usd": 0.000014, "usd_from_cache": 0.000014},
            "cost s: $0.000014; $0.000014 of it from the cache (not paid again)",
        ),
        (
            {"usd": 0.000007, "usd_batched": 0.000007, "usd_from_cache": 0.0},
            "cost s: $0.000007; $0.000007 of it through this run's batch (batch price)",
        ),
    ],
)
def test_the_cost_line_says_what_the_batch_paid_and_what_the_cache_served(
    block: dict[str, Any], line: str
) -> None:
    assert cost_lines([{"suite": "s", "cost": block}]) == [line]
