"""Weights & Biases: one run (`wandb:PROJECT/RUN_ID` resumes that run, e.g. the training
run, so the eval curve sits beside the loss), honouring WANDB_MODE=offline and WANDB_DIR.
Each model's metrics are logged with `agenteval/step`, the x-axis the suites' metrics are
defined against; a new run's own step is the training step too. The params are the run's
config, the results files and the report are saved with it. Extra `[wandb]`."""

from __future__ import annotations

import shutil
from pathlib import Path

from pytest_agenteval.output.trackers.plan import TrackedRun
from pytest_agenteval.output.trackers.targets import Target

STEP = "agenteval/step"


def log_run(target: Target, run: TrackedRun) -> str:
    """Log `run`; its W&B run id. Raises whatever wandb raises."""
    import wandb

    append_to = run.append_to
    settings = wandb.Settings(silent=True, console="off", x_disable_stats=True)
    handle = wandb.init(
        project=target.project,
        id=append_to or None,
        resume="allow" if append_to else None,
        name=None if append_to else run.name,
        config={**run.params, **run.tags},
        allow_val_change=True,
        reinit="create_new",
        settings=settings,
    )
    try:
        handle.define_metric(STEP)
        suites = {key.split("/")[0] for model in run.models for key in run.metrics(model)}
        for suite in sorted(suites):
            handle.define_metric(f"{suite}/*", step_metric=STEP)
        for model in sorted(run.models, key=run.step_of):
            row = {**run.metrics(model), STEP: run.step_of(model)}
            # a resumed run is past its own steps: the training step goes in `agenteval/step` only
            handle.log(row, step=None if append_to else run.step_of(model))
        for (
            path
        ) in run.files:  # copied, not linked: cleaning the results folder before `wandb sync` loses nothing
            copy = Path(handle.dir) / path.name
            shutil.copyfile(path, copy)
            handle.save(str(copy), base_path=handle.dir, policy="now")
        return str(handle.id)
    finally:
        handle.finish()
