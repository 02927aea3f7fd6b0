"""Batch API options (part of the one table: `table.py`)."""

from __future__ import annotations

from pytest_agenteval.config.option import Option, topic

OPTIONS: tuple[Option, ...] = (
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
