"""The cluster fixture itself: a job submitted with sbatch runs on the node, as an array
with the variables `--agenteval-shard auto` reads."""

from __future__ import annotations

from pathlib import Path

from tests.cluster.slurm import SlurmCluster


def test_an_array_job_runs_each_task_with_the_array_variables(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    script = tmp_path / "echo.sbatch"
    script.write_text(
        "#!/bin/bash\n#SBATCH --output=echo-%a.log\n"
        'echo "$SLURM_ARRAY_TASK_ID $SLURM_ARRAY_TASK_COUNT $SLURM_ARRAY_TASK_MIN $GREETING"\n',
        encoding="utf-8",
    )
    job = slurm_cluster.sbatch(script, "--array=1-3", cwd=tmp_path, env={"GREETING": "hello"})
    tasks = slurm_cluster.wait([job], tmp_path)
    assert {key: (t.state, t.exit_code) for key, t in tasks.items()} == {
        f"{job}_{i}": ("COMPLETED", "0:0") for i in (1, 2, 3)
    }
    assert [(tmp_path / f"echo-{i}.log").read_text() for i in (1, 2, 3)] == [
        f"{i} 3 1 hello\n" for i in (1, 2, 3)
    ]
