"""SwanLab: one experiment (`swanlab:PROJECT/EXPERIMENT`; a run id given with
`--agenteval-log swanlab:PROJECT/EXPERIMENT` and SWANLAB_RUN_ID resumes that run), each
model's metrics at its step, the params as the config. SwanLab's own settings choose the
mode (SWANLAB_MODE: online, offline, local) and the folder (SWANLAB_LOG_DIR). Extra `[swanlab]`."""

from __future__ import annotations

import os

from pytest_agenteval.output.trackers.plan import TrackedRun
from pytest_agenteval.output.trackers.targets import Target


def log_run(target: Target, run: TrackedRun) -> str:
    """Log `run`; its SwanLab run id. Raises whatever swanlab raises."""
    import swanlab

    append_to = run.append_to or os.environ.get("SWANLAB_RUN_ID", "")
    handle = swanlab.init(
        project=target.project,
        name=target.run or run.name,
        id=append_to or None,
        resume="allow" if append_to else None,
        config={**run.params, **run.tags},
        reinit=True,
    )
    try:
        for model in sorted(run.models, key=run.step_of):
            handle.log(run.metrics(model), step=run.step_of(model))
        for path in run.files:
            swanlab.save(str(path), base_path=str(path.parent), policy="now")
        return str(handle.id)
    finally:
        swanlab.finish()
