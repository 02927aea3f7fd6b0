"""Model prices (USD per 1M tokens) and what a request's tokens cost at them.

The package ships a few defaults (`prices.toml`, each with its source and the date it was
read); `--prices FILE`, of the same shape, overrides or adds models:

    [models."gpt-4o-mini"]
    input = 0.15           # USD per 1M prompt tokens
    cached_input = 0.075   # USD per 1M prompt tokens the provider served from its prompt cache
    output = 0.6           # USD per 1M completion tokens
    batch_input = 0.075    # optional: the Batch API's prices (--batch); else BATCH_PRICE_RULE
    batch_output = 0.3
    source = "https://openai.com/api/pricing"
    date = "2026-12-02"

A model is priced by the name the run uses (`--model-name`, a judge's `--judge-model`),
else by the `model` the reply named."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: tomli, which pytest itself requires there
    import tomli as tomllib  # type: ignore[no-redef]

PER_TOKENS = 1_000_000
KNOWN_KEYS = ("input", "output", "cached_input", "batch_input", "batch_output", "source", "date")
PRICE_KEYS = ("input", "output", "cached_input", "batch_input", "batch_output")
USD_DIGITS = 9  # nano-dollars: sums of many small costs stay exact enough to read
BATCH_DISCOUNT = 0.5
BATCH_PRICE_RULE = (
    "a generation answered by this run's --batch is billed at the model's batch_input/batch_output "
    "price, else at 0.5 x its input/output price (cached prompt tokens: 0.5 x cached_input)"
)


def format_usd(amount: float) -> str:
    """A USD amount as every line prints one: `$0.000060`, six decimals (a millionth of a
    dollar); a positive amount below that reads `<$0.000001`, not `$0.000000`."""
    printed = f"${amount:.6f}"
    return "<$0.000001" if amount > 0 and printed == "$0.000000" else printed


class PriceError(ValueError):
    """A prices file that cannot be used: one line naming the file, the model and the fix."""


@dataclass(frozen=True)
class Price:
    model: str
    input: float  # USD per 1M prompt tokens
    output: float  # USD per 1M completion tokens
    cached_input: float | None = None  # USD per 1M cached prompt tokens; None: billed as input
    source: str = ""
    date: str = ""
    batch_input: float | None = None  # the Batch API's; None: BATCH_DISCOUNT x input
    batch_output: float | None = None  # the Batch API's; None: BATCH_DISCOUNT x output

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_prompt_tokens: int = 0) -> float:
        """USD of one request's (or generation's) tokens. Cached prompt tokens are part of
        the prompt tokens (as OpenAI reports `prompt_tokens_details.cached_tokens`): they
        are billed at `cached_input` instead of `input` where the model has that price."""
        cached = min(max(cached_prompt_tokens, 0), prompt_tokens) if self.cached_input is not None else 0
        usd = (
            (prompt_tokens - cached) * self.input
            + cached * (self.cached_input or 0.0)
            + completion_tokens * self.output
        ) / PER_TOKENS
        return round(usd, USD_DIGITS)

    def batch_price(self) -> Price:
        """The prices a Batch API request is billed at (BATCH_PRICE_RULE)."""
        half = BATCH_DISCOUNT
        return Price(
            model=self.model,
            input=self.batch_input if self.batch_input is not None else self.input * half,
            output=self.batch_output if self.batch_output is not None else self.output * half,
            cached_input=None if self.cached_input is None else self.cached_input * half,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "cached_input": self.cached_input,
            "output": self.output,
            **{k: getattr(self, k) for k in ("batch_input", "batch_output") if getattr(self, k) is not None},
            "source": self.source,
            "date": self.date,
        }


def parse_prices(text: str, origin: str) -> dict[str, Price]:
    """The `[models."NAME"]` tables of a prices TOML; `origin` names it in errors."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PriceError(f"{origin}: not valid TOML ({exc}); see docs/cost.md for the format") from None
    models = data.get("models")
    if not isinstance(models, Mapping) or not models:
        raise PriceError(
            f'{origin}: no [models."NAME"] tables; write e.g. [models."gpt-4o-mini"] with input = 0.15 '
            "and output = 0.6 (USD per 1M tokens)"
        )
    defaults = {k: data[k] for k in ("source", "date") if isinstance(data.get(k), str)}
    return {str(name): _price(str(name), entry, defaults, origin) for name, entry in models.items()}


def _price(name: str, entry: Any, defaults: Mapping[str, str], origin: str) -> Price:
    where = f'{origin}: [models."{name}"]'
    if not isinstance(entry, Mapping):
        raise PriceError(f"{where} must be a table with input and output (USD per 1M tokens)")
    unknown = sorted(set(entry) - set(KNOWN_KEYS))
    if unknown:
        raise PriceError(f"{where}: unknown key {unknown[0]!r}; the keys are {', '.join(KNOWN_KEYS)}")
    for key in ("input", "output"):
        if key not in entry:
            raise PriceError(f"{where} has no {key} price; add {key} = USD per 1M tokens")
    numbers = {}
    for key in PRICE_KEYS:
        if key not in entry:
            continue
        value = entry[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < 0
        ):
            raise PriceError(f"{where}: {key} must be a number >= 0 (USD per 1M tokens), got {value!r}")
        numbers[key] = float(value)
    for key in ("source", "date"):
        if key in entry and not isinstance(entry[key], str):
            raise PriceError(f"{where}: {key} must be a string, got {entry[key]!r}")
    return Price(
        model=name,
        input=numbers["input"],
        output=numbers["output"],
        cached_input=numbers.get("cached_input"),
        batch_input=numbers.get("batch_input"),
        batch_output=numbers.get("batch_output"),
        source=str(entry.get("source", defaults.get("source", ""))),
        date=str(entry.get("date", defaults.get("date", ""))),
    )


def default_prices() -> dict[str, Price]:
    """The prices the package ships (models/cost/prices.toml)."""
    text = resources.files("pytest_agenteval.models.cost").joinpath("prices.toml").read_text(encoding="utf-8")
    return parse_prices(text, "the default prices (pytest_agenteval/models/cost/prices.toml)")


def load_prices(path: str | None) -> dict[str, Price]:
    """The defaults with `--prices FILE` over them, read once per process and version of
    the file: a relative path is the file it names from here (two runs in one process, in
    two folders, each get their own). Raises PriceError with one line."""
    version = None
    if path:
        try:
            file = Path(path).expanduser().resolve()
            stat = file.stat()
            version = (str(file), stat.st_mtime_ns, stat.st_size)
        except OSError:  # _prices_of says what is wrong with it
            version = None
    return _prices_of(path, version)


@functools.cache
def _prices_of(path: str | None, version: tuple[str, int, int] | None) -> dict[str, Price]:
    prices = default_prices()
    if path:
        file = Path(path).expanduser()
        try:
            text = file.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise PriceError(
                f"--prices {path}: no such file; give a TOML file of prices (docs/cost.md)"
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise PriceError(f"--prices {path}: cannot be read ({exc}); give a readable TOML file") from None
        prices.update(parse_prices(text, f"--prices {path}"))
    return prices


def price_for(prices: Mapping[str, Price], *names: str | None) -> Price | None:
    """The price of the first of `names` (the run's name, then the reply's) that has one."""
    for name in names:
        if name and name in prices:
            return prices[name]
    return None


def billed_name(choice: Any) -> str | None:
    """The name a run's model is billed by: an endpoint's `--model-name` or an SDK's base
    model; None for the models the run itself runs (embedded, GGUF, transformers, a
    launched server), whose cost is device time, not dollars."""
    from pytest_agenteval.models.schemes import SCHEMES

    if choice.kind == "openai" and choice.served is None:
        return str(choice.model_name or "default")
    if choice.kind in SCHEMES:
        return str(choice.model_name)
    return None
