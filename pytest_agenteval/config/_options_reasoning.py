"""Reasoning models: how a reply's reasoning is told from its answer (part of the one
table: `table.py`). --thinking, which asks for the reasoning, is a model option."""

from __future__ import annotations

from pytest_agenteval.config.option import Option, topic

OPTIONS: tuple[Option, ...] = (
    *topic(
        "Reasoning",
        Option(
            "think_tags",
            "--think-tags",
            "",
            "the tags around a reply's reasoning, as OPEN,CLOSE (e.g. '<think>,</think>'); empty: the "
            "chat template's tags where it has any, else <think>,</think>. Scorers read only the "
            "answer after the closing tag (docs/reasoning.md)",
        ),
    ),
)
