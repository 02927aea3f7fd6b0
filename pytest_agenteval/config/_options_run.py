"""Problem selection, AIME, agent budgets, sandbox, results/gates and cache options (part of
the one table: `table.py`)."""

from __future__ import annotations

from pytest_agenteval.config.option import Option, topic
from pytest_agenteval.config.table_scopes import AGENT, AIME, RETOOL


def share(text: str) -> float:
    """A share of generations: a number from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise ValueError("a share of the generations: give a number from 0 to 1, e.g. 0.1")
    return value


share.annotation = float  # type: ignore[attr-defined]  # the Settings attribute


OPTIONS: tuple[Option, ...] = (
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
        "AIME 2025",
        Option(
            "mode",
            "--mode",
            "retool",
            "AIME inference mode: retool (the ReTool lab's default: Python between turns) or text-only",
            choices=("retool", "text-only"),
        ),
        Option(
            "scorer",
            "--scorer",
            "auto",
            "AIME scorer: boxed-integer (text-only rule), "
            "math-verify-tail (ReTool reward rule), auto (the mode's own)",
            choices=("auto", "boxed-integer", "math-verify-tail"),
        ),
        Option(
            "dataset_path",
            "--dataset-path",
            None,
            "AIME data: a JSONL or parquet file or a save_to_disk folder (default: the hub id)",
        ),
        Option("dataset_id", "--dataset-id", "yentinglin/aime_2025", "AIME hub dataset id"),
        Option("dataset_revision", "--dataset-revision", None, "hub revision (commit or tag)"),
        applies_to=AIME,
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
        "Results, gates and baselines",
        Option(
            "out",
            "--agenteval-out",
            None,
            "results JSONL (default: agenteval-results/<suite>-<model>-<time>-<pid>.jsonl)",
            local=True,
        ),
        Option(
            "gates",
            "--agenteval-gate",
            (),
            'threshold gate, e.g. "aime25.average_at_n >= '
            "0.30\" (repeatable; with a gate the exit status is the gate's)",
            multiple=True,
            local=True,
        ),
        Option(
            "compare",
            "--agenteval-compare",
            None,
            "baseline results JSONL: fail on a significant drop (paired bootstrap over shared problems)",
            local=True,
        ),
        Option(
            "compare_tolerance",
            "--agenteval-compare-tolerance",
            0.0,
            "drop in a headline metric tolerated before the baseline comparison fails",
            float,
            local=True,
        ),
        Option(
            "length_warn_share",
            "--length-warn-share",
            0.1,
            "warn in the summary when more than this share of a suite's generations hit max_tokens "
            "(the budget, not the model, decided the score)",
            share,
            local=True,
        ),
        Option(
            "progress",
            "--agenteval-progress",
            "auto",
            "live progress line: auto (redrawn in place on a terminal, a line every 30 s otherwise), "
            "off, or SECONDS between lines (also off with -q -q)",
            local=True,
        ),
    ),
    *topic(
        "Cache",
        Option(
            "cache_dir",
            "--agenteval-cache-dir",
            None,
            "generation cache directory (default: <pytest cache dir>/agenteval); may be shared storage",
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
