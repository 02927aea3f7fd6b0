"""The options of one suite each: AIME 2025, BFCL, GAIA and generated data (part of the one
table: `table.py`)."""

from __future__ import annotations

from pytest_agenteval.config.option import Option, group, topic
from pytest_agenteval.config.table_scopes import AIME

OPTIONS: tuple[Option, ...] = group(
    "suites",
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
        "BFCL",
        Option(
            "bfcl_data_dir",
            "--bfcl-data-dir",
            None,
            "BFCL data folder (default: the installed bfcl-eval package)",
        ),
        Option(
            "bfcl_style", "--bfcl-style", "prompting", "BFCL inference style", choices=("prompting", "native")
        ),
        Option(
            "bfcl_weights",
            "--bfcl-weights",
            None,
            "category weights for weighted accuracy, e.g. simple_python=2,multiple=1",
        ),
        Option(
            "bfcl_export_dir",
            "--bfcl-export-dir",
            None,
            "also write the official BFCL_v4_<category>_result.json files under this folder",
        ),
        Option(
            "bfcl_export_model",
            "--bfcl-export-model",
            None,
            "model folder of the export, a model bfcl-eval lists with the same style "
            "(default: open-mistral-nemo-2407, or open-mistral-nemo-2407-FC for --bfcl-style native)",
        ),
        Option(
            "bfcl_progressive",
            "--bfcl-progressive",
            None,
            "run 5, then 50, then all items per category while accuracy stays >= this threshold",
            float,
        ),
        Option(
            "bfcl_search_backend",
            "--bfcl-search-backend",
            None,
            "BFCL web search: base URL of a SerpAPI-compatible search server (default: SerpAPI "
            "itself when SERPAPI_API_KEY is set; else web search items skip)",
        ),
        applies_to=("bfcl",),
    ),
    *topic(
        "GAIA",
        Option(
            "gaia_path",
            "--gaia-path",
            None,
            "local GAIA folder (default: the gated hub dataset, with HF_TOKEN)",
        ),
        Option("gaia_split", "--gaia-split", "validation", "GAIA split", choices=("validation", "test")),
        Option(
            "gaia_unordered_lists",
            "--gaia-unordered-lists",
            False,
            "compare list answers ignoring order (the design documents' variant; official is in order)",
            bool,
        ),
        Option("gaia_max_steps", "--gaia-max-steps", 8, "default agent: max model turns and tool calls", int),
        Option(
            "gaia_submission",
            "--gaia-submission",
            None,
            "test split: leaderboard submission "
            "JSONL path (default: agenteval-results/gaia-test-submission.jsonl)",
        ),
        Option(
            "tool_protocol",
            "--tool-protocol",
            "auto",
            "GAIA default agent tool calls: native "
            "tools/tool_calls, the raw-text <tool_call> protocol, or auto (native for endpoints)",
            choices=("auto", "native", "text"),
        ),
        applies_to=("gaia",),
    ),
    *topic(
        "Generated data (datagen)",
        Option(
            "datagen_path",
            "--datagen-path",
            None,
            "generated problems JSONL (problem, answer, solution, topic)",
        ),
        Option(
            "reference_path",
            "--reference-path",
            None,
            "datagen reference problems: JSONL, parquet or save_to_disk folder (default: hub math-ai/aime25)",
        ),
        Option(
            "judge_endpoints",
            "--judge-endpoint",
            (),
            "datagen judge: OpenAI-compatible base URL (repeatable: a panel; default: the run's own model)",
            multiple=True,
        ),
        Option(
            "judge_models",
            "--judge-model",
            (),
            "model name of each --judge-endpoint (repeatable)",
            multiple=True,
        ),
        Option(
            "datagen_opponents", "--datagen-opponents", 1, "reference opponents per generated problem", int
        ),
        Option("datagen_reasks", "--datagen-reasks", 2, "re-asks of a judge whose reply does not parse", int),
        Option(
            "datagen_solve",
            "--datagen-solve",
            0,
            "solve each generated problem this many times with the run's model (0: off)",
            int,
        ),
        Option(
            "datagen_verifications",
            "--datagen-verifications",
            None,
            "human verifications file (default: <data>_verifications.json beside --datagen-path)",
        ),
        applies_to=("datagen",),
    ),
)
