"""Cost and budgets: prices, the run's ceilings, and the estimate (part of the one table: `table.py`)."""

from __future__ import annotations

from pytest_agenteval.config.option import Option, topic

OPTIONS: tuple[Option, ...] = (
    *topic(
        "Cost and budgets",
        Option(
            "prices",
            "--prices",
            None,
            'TOML of model prices in USD per 1M tokens ([models."NAME"] input, output, cached_input, '
            "source, date), over the defaults the package ships (docs/cost.md)",
        ),
        Option(
            "max_cost",
            "--max-cost",
            None,
            "stop sending requests once the next one could take the run's spending (judges included) "
            "past this many USD; every model in use needs a price",
            float,
            local=True,
        ),
        Option(
            "max_total_tokens",
            "--max-total-tokens",
            None,
            "stop sending requests once the next one could take the run's prompt + completion tokens "
            "past this many (no price needed)",
            int,
            local=True,
        ),
        Option(
            "estimate",
            "--estimate",
            False,
            "run only a sample of each suite's selected items and print the projected tokens and cost "
            "of the whole selection (exit 0)",
            bool,
            local=True,
        ),
        Option(
            "estimate_sample",
            "--estimate-sample",
            3,
            "items per suite --estimate runs (evenly spaced over the selection; cache hits count with "
            "their recorded tokens)",
            int,
            local=True,
        ),
    ),
)
