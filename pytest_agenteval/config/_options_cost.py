"""Cost: prices, the run's ceilings, the estimate, and the Batch API (part of the one table:
`table.py`)."""

from __future__ import annotations

from pytest_agenteval.config.option import Option, group, topic

OPTIONS: tuple[Option, ...] = group(
    "cost",
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
            "budget_ledger",
            "--budget-ledger",
            None,
            "a ledger FILE (created if missing) that the shards of a cluster run draw on together: "
            "their --max-cost/--max-total-tokens is one budget. It must sit on storage every shard sees "
            "with working file locks (NFS with locking, Lustre mounted -o flock), checked at start-up; "
            "it keeps what was spent, so a new budget takes a new file",
            local=True,
        ),
        Option(
            "budget_per_shard",
            "--budget-per-shard",
            False,
            "with --agenteval-shard and no --budget-ledger: each shard's --max-cost/--max-total-tokens "
            "bounds that shard alone (N shards may spend N times it); without it the two are refused",
            bool,
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
    *topic(
        "Batch API",
        Option(
            "batch",
            "--batch",
            False,
            "send the run's single-turn requests first as OpenAI Batch API batches (/v1/files, "
            "/v1/batches: about half the price, answered within 24 h), one per suite; the items then "
            "read the replies from the generation cache. --endpoint models only; multi-turn suites "
            "refuse it (docs/batch.md)",
            bool,
            local=True,
        ),
        Option(
            "batch_poll_interval",
            "--batch-poll-interval",
            30.0,
            "seconds between two looks at a batch's status while --batch waits for it",
            float,
            local=True,
        ),
    ),
)
