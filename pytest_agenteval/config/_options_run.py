"""The run options: which problems, the agent budgets, the sandbox and the generation cache
(part of the one table: `table.py`)."""

from __future__ import annotations

from pytest_agenteval.config.option import Option, group, topic
from pytest_agenteval.config.table_scopes import AGENT, RETOOL

OPTIONS: tuple[Option, ...] = group(
    "run",
    *topic(
        "Problem selection",
        Option(
            "limit",
            "--limit",
            0,
            "run only the first K selected problems of each suite, in dataset order (0: all)",
            int,
        ),
        Option(
            "limit_per_category",
            "--limit-per-category",
            0,
            "run only the first K selected problems of each category (BFCL category, GAIA level)",
            int,
        ),
    ),
    *topic(
        "Agent budgets (AIME retool, the GAIA agent)",
        Option("max_code_calls", "--max-code-calls", 4, "code calls per trajectory", int, applies_to=RETOOL),
        Option("max_assistant_turns", "--max-assistant-turns", 6, "assistant turns", int, applies_to=RETOOL),
        Option(
            "max_trajectory_tokens", "--max-trajectory-tokens", 8192, "prompt + all turns, in tokens", int
        ),
        Option(
            "max_assistant_tokens",
            "--max-assistant-tokens",
            1024,
            "new tokens per assistant turn (the --max-tokens of a tool loop)",
            int,
            instead="--max-tokens",
        ),
        Option(
            "max_tool_response_tokens",
            "--max-tool-response-tokens",
            512,
            "tokens of tool output shown to the model (the tail is kept)",
            int,
        ),
        applies_to=AGENT,
    ),
    *topic(
        "Sandbox",
        Option("sandbox_timeout", "--sandbox-timeout", 30.0, "seconds per code call", float),
        Option(
            "sandbox_workers",
            "--sandbox-workers",
            0,
            "code calls running at once on each machine, shared by its xdist workers (0: min(8, CPU cores))",
            int,
            local=True,
        ),
        Option(
            "sandbox_level",
            "--sandbox-level",
            "auto",
            "containment: auto (strongest available), basic, landlock, bwrap",
            choices=("auto", "basic", "landlock", "bwrap"),
        ),
        applies_to=AGENT,
    ),
    *topic(
        "Cache",
        Option(
            "cache_dir",
            "--agenteval-cache-dir",
            None,
            "generation cache directory (default: $AGENTEVAL_CACHE_DIR, else the user cache folder, "
            "$XDG_CACHE_HOME/pytest-agenteval); may be shared storage",
            local=True,
        ),
        Option(
            "no_cache", "--agenteval-no-cache", False, "neither read nor write the cache", bool, local=True
        ),
        Option(
            "model_revision",
            "--model-revision",
            None,
            "names the weights (e.g. the checkpoint step) in the cache key and the results, for "
            "--endpoint servers whose /v1/models reports nothing about them",
        ),
    ),
)
