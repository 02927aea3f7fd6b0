"""Shards (clusters): one pytest run evaluates one shard of the selected items; `pytest-agenteval
merge` joins the shards' results files (part of the one table: `table.py`)."""

from __future__ import annotations

from pytest_agenteval.config.option import Option, group, topic

OPTIONS: tuple[Option, ...] = group(
    "cluster",
    *topic(
        "Shards (clusters)",
        Option(
            "shard",
            "--agenteval-shard",
            None,
            "evaluate shard I of N of the selected items, I/N with 0 <= I < N (e.g. 2/8); auto: from "
            "the scheduler (SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT, or Kubernetes' "
            "JOB_COMPLETION_INDEX with --agenteval-shard-count); merge the shards' results files "
            "with pytest-agenteval merge",
            local=True,
        ),
        Option(
            "shard_count",
            "--agenteval-shard-count",
            0,
            "N of --agenteval-shard auto on a Kubernetes Indexed Job (its completions)",
            int,
            local=True,
        ),
    ),
)
