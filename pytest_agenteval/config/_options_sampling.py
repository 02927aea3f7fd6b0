"""The sampling options: N, temperature, top-p/top-k, the presence penalty, max tokens, the
seed; and the presets (published protocols) that set them. Part of the one table, `table.py`."""

from __future__ import annotations

from pytest_agenteval.config.option import Option, group, topic
from pytest_agenteval.config.presets import PresetName
from pytest_agenteval.config.table_scopes import AIME

OPTIONS: tuple[Option, ...] = group(
    "sampling",
    *topic(
        "Sampling",
        Option(
            "val_n",
            "--val-n",
            12,
            "generations per problem (N); BFCL and GAIA: 1 unless given",
            int,
            applies_to=(*AIME, "bfcl", "gaia"),
            instead="--datagen-solve",
        ),
        Option(
            "temperature",
            "--temperature",
            1.0,
            "sampling temperature; BFCL: 0.001, GAIA and datagen: 0.0 unless given",
            float,
        ),
        Option("top_p", "--top-p", 0.7, "nucleus sampling top-p", float),
        Option("top_k", "--top-k", -1, "top-k (<= 0: off, and not sent to endpoints)", int),
        Option(
            "presence_penalty",
            "--presence-penalty",
            0.0,
            "presence penalty, -2 to 2 (0: not sent); endpoints, launched servers and in-process "
            "llama.cpp take it",
            float,
        ),
        Option(
            "max_tokens",
            "--max-tokens",
            8192,
            "max new tokens per completion; BFCL: 1024, datagen: 512 unless given",
            int,
            applies_to=("aime25:text-only", "bfcl", "datagen"),
            instead="--max-assistant-tokens",
        ),
        Option("seed", "--seed", 42, "run seed; sample j of problem p uses hash(seed, p, j)", int),
    ),
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
    ),
)
