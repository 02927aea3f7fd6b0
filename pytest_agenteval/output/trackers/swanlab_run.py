"""SwanLab: one experiment (`swanlab:PROJECT/EXPERIMENT`; a run id given with
`--agenteval-log swanlab:PROJECT/EXPERIMENT` and SWANLAB_RUN_ID resumes that run, for the
models with a step), each
model's metrics at its step, the params as the config. SwanLab's own settings choose the
mode (SWANLAB_MODE: online, offline, local) and the folder (SWANLAB_LOG_DIR). Extra `[swanlab]`."""

from __future__ import annotations

import shutil
from pathlib import Path

from pytest_agenteval.output.trackers.plan import TrackedRun
from pytest_agenteval.output.trackers.targets import Target


def run_name(target: Target, run: TrackedRun) -> str:
    """`swanlab:P/EXPERIMENT`: the experiment's name for the run of the models with a step (or
    the lone model), `EXPERIMENT LABEL` for each model logged in a run of its own."""
    if not target.run:
        return run.name
    return f"{target.run} {run.label}" if run.label else target.run


def log_run(target: Target, run: TrackedRun) -> str:
    """Log `run`; its SwanLab run id. Raises whatever swanlab raises."""
    import swanlab

    append_to = run.append_to  # SWANLAB_RUN_ID's, for the run of the models with a step only
    handle = swanlab.init(
        project=target.project,
        name=run_name(target, run),
        id=append_to or None,
        resume="allow" if append_to else None,
        config={**run.params, **run.tags},
        reinit=True,
    )
    try:
        for model in sorted(run.models, key=run.step_of):
            handle.log(run.metrics(model), step=run.step_of(model))
        for path in run.files:  # copied first: SwanLab links a file only where none is yet
            copy = Path(handle.dir) / "files" / path.name
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, copy)
            swanlab.save(str(path), base_path=str(path.parent), policy="now")
        return str(handle.id)
    finally:
        swanlab.finish()
