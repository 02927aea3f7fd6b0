"""Reasoning models: --thinking asks a model for its reasoning, --think-tags tells the
reasoning from the answer (part of the one table: `table.py`)."""

from __future__ import annotations

from pytest_agenteval.config.option import Option, group, topic

OPTIONS: tuple[Option, ...] = group(
    "reasoning",
    *topic(
        "Reasoning",
        Option(
            "thinking",
            "--thinking",
            "off",
            "chat-template thinking: off sends chat_template_kwargs.enable_thinking=false, "
            "omit sends nothing",
            choices=("off", "on", "omit"),
        ),
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
