"""The cluster fixture itself: jobs submitted with sbatch run on the node, an array's
tasks with the variables `--agenteval-shard auto` reads. A one-index array (a
resubmitted task) reads as task 0 of 1 there, which is why examples/slurm/agenteval.sbatch
takes SHARDS=N for a resubmission."""

from __future__ import annotations

from pathlib import Path

from tests.cluster.slurm import SlurmCluster

ECHO = (
    "#!/bin/bash\n#SBATCH --output=echo-%A-%a.log\n"
    'echo "$SLURM_ARRAY_TASK_ID $SLURM_ARRAY_TASK_COUNT $SLURM_ARRAY_TASK_MIN $GREETING"\n'
)


def test_array_tasks_run_with_the_array_variables_and_the_submitting_environment(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    script = tmp_path / "echo.sbatch"
    script.write_text(ECHO, encoding="utf-8")
    whole = slurm_cluster.sbatch(script, "--array=1-3", cwd=tmp_path, env={"GREETING": "hello"})
    one = slurm_cluster.sbatch(script, "--array=2", cwd=tmp_path, env={"GREETING": "again"})
    tasks = slurm_cluster.wait([whole, one], tmp_path)
    assert {key: (t.state, t.exit_code) for key, t in tasks.items()} == {
        **{f"{whole}_{i}": ("COMPLETED", "0:0") for i in (1, 2, 3)},
        f"{one}_2": ("COMPLETED", "0:0"),
    }
    # ID COUNT MIN: --agenteval-shard auto reads (ID - MIN)/COUNT, so --array=2 alone is 0/1
    assert [(tmp_path / f"echo-{whole}-{i}.log").read_text() for i in (1, 2, 3)] == [
        f"{i} 3 1 hello\n" for i in (1, 2, 3)
    ]
    assert (tmp_path / f"echo-{one}-2.log").read_text() == "2 1 2 again\n"
