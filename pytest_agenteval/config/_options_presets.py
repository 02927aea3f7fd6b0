"""Presets (published protocols) and the presence penalty (part of the one table: `table.py`)."""

from __future__ import annotations

from pytest_agenteval.config.option import Option, topic
from pytest_agenteval.config.presets import PresetName

OPTIONS: tuple[Option, ...] = (
    *topic(
        "Presets",
        Option(
            "preset",
            "--agenteval-preset",
            None,
            "a published protocol as option defaults (retool-lab, qwen3-thinking, qwen3-nonthinking, "
            "deepseek-r1; docs/presets.md): options given on the command line or in the ini file win",
            PresetName(),
        ),
        Option(
            "presence_penalty",
            "--presence-penalty",
            0.0,
            "presence penalty, -2 to 2 (0: not sent); endpoints, launched servers and in-process "
            "llama.cpp take it",
            float,
        ),
    ),
)
