"""Prices: the cost of tokens (table-driven, exact values), the TOML loader's one-line
errors, and the defaults the package ships (each with its source and date)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agenteval.models import ModelChoice
from pytest_agenteval.models.cost.prices import (
    Price,
    PriceError,
    billed_name,
    default_prices,
    load_prices,
    parse_prices,
    price_for,
)

MINI = Price("gpt-4o-mini", input=0.15, output=0.6, cached_input=0.075)
NO_CACHED_PRICE = Price("plain", input=3.0, output=15.0)


@pytest.mark.parametrize(
    ("price", "prompt", "completion", "cached", "usd"),
    [
        (MINI, 0, 0, 0, 0.0),
        (MINI, 1_000_000, 0, 0, 0.15),
        (MINI, 0, 1_000_000, 0, 0.6),
        (MINI, 1000, 500, 0, 0.00045),  # 1000 x 0.15e-6 + 500 x 0.6e-6
        (MINI, 1000, 500, 400, 0.00042),  # 600 x 0.15e-6 + 400 x 0.075e-6 + 500 x 0.6e-6
        (MINI, 1000, 0, 5000, 0.000075),  # cached never counts past the prompt
        (MINI, 1000, 0, -3, 0.00015),  # nor below zero
        (NO_CACHED_PRICE, 1000, 500, 400, 0.0105),  # no cached price: billed as input
        (Price("free", 0.0, 0.0), 123_456, 654_321, 0, 0.0),
        (MINI, 7, 3, 0, 0.00000285),  # 1.05e-6 + 1.8e-6
        (MINI, 1, 0, 0, 0.00000015),
        (Price("tiny", 0.0001, 0.0), 1, 0, 0, 0.0),  # 1e-10 USD: under a nano-dollar, rounded away
    ],
)
def test_what_tokens_cost(price: Price, prompt: int, completion: int, cached: int, usd: float) -> None:
    assert price.cost(prompt, completion, cached) == usd  # at nano-dollars: exact


def _parse(text: str) -> dict[str, Price]:
    return parse_prices(text, "--prices p.toml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[models",
            "--prices p.toml: not valid TOML (Expected ']' at the end of a table declaration",
        ),
        ("source = 'x'\n", '--prices p.toml: no [models."NAME"] tables; write e.g. [models."gpt-4o-mini"]'),
        (
            '[models."m"]\ninput = 1\n',
            '--prices p.toml: [models."m"] has no output price; add output = USD per 1M tokens',
        ),
        (
            '[models."m"]\noutput = 1\n',
            '--prices p.toml: [models."m"] has no input price; add input = USD per 1M tokens',
        ),
        (
            '[models."m"]\ninput = "cheap"\noutput = 1\n',
            "--prices p.toml: [models.\"m\"]: input must be a number >= 0 (USD per 1M tokens), got 'cheap'",
        ),
        (
            '[models."m"]\ninput = -1\noutput = 1\n',
            '--prices p.toml: [models."m"]: input must be a number >= 0 (USD per 1M tokens), got -1',
        ),
        (
            '[models."m"]\ninput = 1\noutput = 1\ncached_input = true\n',
            '--prices p.toml: [models."m"]: cached_input must be a number >= 0 (USD per 1M tokens), got True',
        ),
        (
            '[models."m"]\ninptu = 1\ninput = 1\noutput = 1\n',
            "--prices p.toml: [models.\"m\"]: unknown key 'inptu'; the keys are input, output, cached_input, "
            "batch_input, batch_output, source, date",
        ),
        (
            '[models."m"]\ninput = 1\noutput = 1\ndate = 2026-12-02\n',
            '--prices p.toml: [models."m"]: date must be a string, got datetime.date(2026, 12, 2)',
        ),
        ("[models]\nm = 3\n", '--prices p.toml: [models."m"] must be a table with input and output'),
    ],
)
def test_a_bad_prices_file_is_one_line_naming_the_fix(text: str, message: str) -> None:
    with pytest.raises(PriceError) as caught:
        _parse(text)
    assert str(caught.value).startswith(message), str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_prices_file_gives_each_model_its_source_and_date_or_the_files() -> None:
    prices = _parse(
        'source = "our contract"\ndate = "2026-11-01"\n'
        '[models."a"]\ninput = 1\noutput = 2\n'
        '[models."b/c"]\ninput = 0.5\noutput = 1.5\ncached_input = 0.25\n'
        'source = "sheet"\ndate = "2026-10-01"\n'
    )
    assert prices == {
        "a": Price("a", 1.0, 2.0, None, "our contract", "2026-11-01"),
        "b/c": Price("b/c", 0.5, 1.5, 0.25, "sheet", "2026-10-01"),
    }


def test_the_file_overrides_and_adds_to_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('[models."gpt-4o-mini"]\ninput = 9\noutput = 9\n[models."mine"]\ninput = 1\noutput = 1\n')
    prices = load_prices(str(path))
    assert (prices["gpt-4o-mini"].input, prices["mine"].output) == (9.0, 1.0)
    assert prices["gpt-4o"] == default_prices()["gpt-4o"]


def test_a_missing_prices_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(PriceError, match=r"^--prices .*nope.toml: no such file; give a TOML file of prices"):
        load_prices(str(tmp_path / "nope.toml"))


def test_every_default_price_names_its_source_and_the_date_it_was_read() -> None:
    defaults = default_prices()
    assert {"gpt-4o", "gpt-4o-mini"} <= set(defaults)
    for price in defaults.values():
        assert "litellm" in price.source and price.date == "2026-12-02", price
        assert price.cached_input is not None and price.cached_input < price.input < price.output
    # as litellm's table had them (USD per token x 1e6)
    assert (
        defaults["gpt-4o-mini"].input,
        defaults["gpt-4o-mini"].cached_input,
        defaults["gpt-4o-mini"].output,
    ) == (
        0.15,
        0.075,
        0.6,
    )


@pytest.mark.parametrize(
    ("names", "found"),
    [
        (("gpt-4o-mini",), "gpt-4o-mini"),
        (("nope", "gpt-4o"), "gpt-4o"),
        ((None, ""), None),
        (("nope",), None),
    ],
)
def test_a_model_is_priced_by_the_first_name_that_has_a_price(names: tuple, found: str | None) -> None:
    price = price_for(default_prices(), *names)
    assert (price.model if price else None) == found


@pytest.mark.parametrize(
    ("choice", "name"),
    [
        (ModelChoice("openai", endpoints=("http://h/v1",), model_name="gpt-4o"), "gpt-4o"),
        (ModelChoice("openai", endpoints=("http://h/v1",)), "default"),
        (ModelChoice("openai", endpoints=("http://h/v1",), model_name="m", served={"label": "x"}), None),
        (ModelChoice("tinker", model_name="Qwen/Qwen3-8B", uri="tinker://run/1"), "Qwen/Qwen3-8B"),
        (ModelChoice("embedded", path=Path("m.gguf")), None),
        (ModelChoice("gguf", path=Path("m.gguf")), None),
        (ModelChoice("transformers", path=Path("ckpt")), None),
    ],
)
def test_which_models_are_billed_in_dollars(choice: ModelChoice, name: str | None) -> None:
    assert billed_name(choice) == name
