"""Which tracker runs a run's models go into: every model with a training step into one run
(the one `run_id` names, e.g. the training run itself, or a new one), each at its step; a
model without a step into a run of its own, tagged with its label."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agenteval.output.trackers.flatten import gate_tags, metrics_of, model_params, run_params


@dataclass(frozen=True)
class ModelResults:
    """One model's results: its label, its training step (None: none known), its suites'
    summary lines and its results file."""

    label: str
    step: int | None
    summaries: tuple[Mapping[str, Any], ...]
    file: Path | None


@dataclass(frozen=True)
class TrackedRun:
    """What goes into one tracker run: the models (each logged at `step_of`), params, tags,
    files; `append_to` is the run id to add to ("" : a new run named `name`)."""

    name: str
    models: tuple[ModelResults, ...]
    append_to: str = ""
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    files: tuple[Path, ...] = ()
    label: str = ""  # the model's label, for a model logged in a run of its own beside others

    def metrics(self, model: ModelResults) -> dict[str, float]:
        out: dict[str, float] = {}
        for summary in model.summaries:
            out.update(metrics_of(summary))
        return out

    @staticmethod
    def step_of(model: ModelResults) -> int:
        return model.step if model.step is not None else 0


def _params(models: Sequence[ModelResults]) -> dict[str, str]:
    params: dict[str, str] = {}
    for model in models:
        for summary in model.summaries:
            params.update(run_params(summary))
            if len(models) == 1:
                params.update(model_params(summary))
            else:  # one identity per model: `model/step-200/sha256`
                params.update(model_params(summary, f"model/{model.label}"))
    return params


def _tags(models: Sequence[ModelResults]) -> dict[str, str]:
    tags = {"agenteval.models": ", ".join(m.label for m in models)}
    if len(models) == 1:
        tags["agenteval.model_label"] = models[0].label
    for model in models:
        for summary in model.summaries:
            tags.update(gate_tags(summary, model.label if len(models) > 1 else None))
    return tags


def _run(
    name: str, models: Sequence[ModelResults], append_to: str, report: Path | None, label: str = ""
) -> TrackedRun:
    files = tuple(m.file for m in models if m.file is not None) + ((report,) if report else ())
    return TrackedRun(name, tuple(models), append_to, _params(models), _tags(models), files, label)


def plan_runs(
    models: Sequence[ModelResults], append_to: str = "", report: Path | None = None
) -> list[TrackedRun]:
    """The runs to log. Models with a step share one run (`append_to` when given); each one
    without gets its own, except a lone model, which goes where `append_to` says."""
    stepped = [m for m in models if m.step is not None]
    plain = [m for m in models if m.step is None]
    suites = sorted({str(s["suite"]) for m in models for s in m.summaries})
    runs = []
    if stepped:
        name = "+".join(suites) + (f" {stepped[0].label}" if len(stepped) == 1 else " sweep")
        runs.append(_run(name, stepped, append_to, report))
    for model in plain:
        alone = not stepped and len(plain) == 1
        name = f"{'+'.join(suites)} {model.label}"
        runs.append(_run(name, [model], append_to if alone else "", report, "" if alone else model.label))
    return runs


def single_model(summaries: Sequence[Mapping[str, Any]], file: Path | None) -> ModelResults:
    """The one model of a run (or a merge) from its summary lines: its label and step from
    its `--model-path` (`step-800`, `ckpt@800=PATH`), else its identity's label, no step."""
    from pytest_agenteval.models.sweep import expand_model_paths

    config = summaries[0].get("config") or {} if summaries else {}
    values = list(config.get("model_paths") or ())
    label, step = None, None
    if len(values) == 1:
        try:
            (model,) = expand_model_paths(values)
        except ValueError:
            model = None
        if model is not None:
            step = model.step
            label = model.label if step is not None or "=" in values[0] else None
    label = label or str((summaries[0].get("model") or {}).get("label") or "model")
    return ModelResults(label, step, tuple(summaries), file)
