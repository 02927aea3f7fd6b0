"""MLflow: one run through `MlflowClient` (the tracking server's REST API, or a local
store), metrics in batches at each model's step, params, tags, and the results files and
the report as artifacts. Extra `[mlflow]`."""

from __future__ import annotations

import time

from pytest_agenteval.output.trackers.plan import TrackedRun
from pytest_agenteval.output.trackers.targets import Target, mlflow_location

EXPERIMENT = "agenteval"  # the experiment of a run that names none
_BATCH = 100  # MLflow's limit of params (and a safe count of metrics) in one log_batch


def _chunks(items: list, size: int = _BATCH) -> list[list]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def log_run(target: Target, run: TrackedRun) -> str:
    """Log `run`; its MLflow run id. Raises whatever the client raises."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param, RunTag

    client = MlflowClient(mlflow_location(target) or None)
    if run.append_to:
        run_id = run.append_to
        existing = client.get_run(run_id).data.params  # params are set once: keep the run's own
    else:
        name = target.project or EXPERIMENT
        found = client.get_experiment_by_name(name)
        experiment = found.experiment_id if found is not None else client.create_experiment(name)
        run_id = client.create_run(experiment, run_name=run.name).info.run_id
        existing = {}
    now = int(time.time() * 1000)
    metrics = [
        Metric(key, value, now, run.step_of(model))
        for model in run.models
        for key, value in run.metrics(model).items()
    ]
    params = [Param(k, v) for k, v in run.params.items() if k not in existing]
    tags = [RunTag(k, v) for k, v in run.tags.items()]
    for batch in _chunks(metrics, 500):
        client.log_batch(run_id, metrics=batch)
    for batch in _chunks(params):
        client.log_batch(run_id, params=batch)
    client.log_batch(run_id, tags=tags)
    for path in run.files:
        client.log_artifact(run_id, str(path))
    if not run.append_to:
        client.set_terminated(run_id)
    return run_id
