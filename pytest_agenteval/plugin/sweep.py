"""A checkpoint sweep (several `--model-path`): its models on every process, the start-up
refusals, the markers, one item per (model, problem), and the per-model model choices the
Runtime samples from. docs/sweeps.md is the user's page."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.api.records import Problem
from pytest_agenteval.config.options import Settings
from pytest_agenteval.models import ModelChoice, choose_model
from pytest_agenteval.models.schemes import SCHEMES as SDK_SCHEMES
from pytest_agenteval.models.sweep import SweepModel, absolute, expand_model_paths, is_glob, marker_name
from pytest_agenteval.plugin.sequential import SWEEP_LABELS

MODELS = pytest.StashKey[list[SweepModel]]()  # the sweep's models, in order ([] : not a sweep)
WORKERINPUT_MODELS = "agenteval_sweep_models"  # [[label, source], ...] as the controller expanded
WORKERINPUT_SERVED = "agenteval_sweep_served"  # {label: a launched server's workerinput}
WORKERINPUT_REPORTED = "agenteval_sweep_reported"  # {label: [/v1/models entry, ...]}


def models_of(config: pytest.Config, settings: Settings, evaluating: bool) -> list[SweepModel]:
    """The run's models: on a worker as the controller expanded them; on the controller
    from --model-path (a bad value is a usage error when the run evaluates). A one-model
    run is no sweep: []."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        given = workerinput.get(WORKERINPUT_MODELS) or []
        return [SweepModel(str(label), str(source)) for label, source in given]
    values = settings.model_paths
    if len(values) < 2 and not any(is_glob(v) or "=" in v for v in values):
        return []
    if evaluating and len(values) > 1:
        refuse_sources(values)  # before the labels: `replay:x.jsonl` is no label
    try:
        models = [absolute(model) for model in expand_model_paths(values)]
    except ValueError as exc:
        if evaluating:
            raise pytest.UsageError(str(exc)) from None
        return []
    return models


def one_model_settings(settings: Settings, models: Sequence[SweepModel]) -> Settings:
    """A glob or a `LABEL=PATH` that names one model is a one-model run of that path."""
    if len(models) == 1:
        return dataclasses.replace(settings, model_path=models[0].source)
    return settings


def check_sweep(settings: Settings, models: Sequence[SweepModel]) -> None:
    """What a sweep cannot do yet: one line naming what to do instead."""
    names = ", ".join(m.label for m in models)
    if settings.endpoints:
        raise pytest.UsageError(
            f"--endpoint with {len(models)} --model-path models ({names}): a sweep samples each "
            "model from its own server; drop --endpoint (the models run in-process, or with --serve "
            "on launched servers), or run one --endpoint per run"
        )
    refuse_sources([m.source for m in models])
    if settings.batch:
        raise pytest.UsageError("--batch with several --model-path models: run one model per run")
    if settings.compare:
        raise pytest.UsageError(
            "--compare with several --model-path models: compare the sweep's models with gates "
            "naming them (docs/sweeps.md), or compare one model per run"
        )


def refuse_sources(sources: Sequence[str]) -> None:
    """Sources a sweep does not take: trio:// and tinker:// checkpoints. (A replay takes a
    label, `base=replay:x.jsonl`: expand_model_paths refuses `replay:x` as a label.)"""
    for source in sources:
        value = source.partition("=")[2] if "=" in source.split("://")[0].split(":")[0] else source
        scheme = value.split("://", 1)[0]
        if "://" in value and scheme in SDK_SCHEMES:
            raise pytest.UsageError(
                f"--model-path {source} in a sweep: {scheme}:// checkpoints are evaluated one "
                "per run; run each with its own --model-path"
            )


def model_settings(settings: Settings, model: SweepModel) -> Settings:
    """The settings of one model of a sweep: a one-model run of its path."""
    return dataclasses.replace(settings, model_path=model.source)


def register_markers(config: pytest.Config, models: Sequence[SweepModel]) -> None:
    for model in models:
        config.addinivalue_line(
            "markers", f"{marker_name(model.label)}: the items of the sweep's model {model.label}"
        )


def parametrize(metafunc: pytest.Metafunc, problems: Sequence[Problem]) -> bool:
    """In a sweep, one item per (model, problem), model by model: `test_aime25[step-200:12]`,
    marked with the problem's markers and `model_<label>`. False: not a sweep."""
    models = metafunc.config.stash.get(MODELS, [])
    if not models:
        return False
    params = []
    for model in models:
        mark = getattr(pytest.mark, marker_name(model.label))
        for problem in problems:
            copy = dataclasses.replace(problem, model=model.label)
            marks = [getattr(pytest.mark, m) for m in problem.markers] + [mark]
            params.append(pytest.param(copy, id=copy.node_id, marks=marks))
    metafunc.parametrize("problem", params)
    return True


def lazy_choices(settings: Settings, models: Sequence[SweepModel]) -> dict[str, ModelChoice]:
    """Each model's choice without start-up checks (a worker: the controller checked them)."""
    choices = {}
    for model in models:
        try:
            choices[model.label] = choose_model(
                model.source,
                (),
                settings.model_name,
                base_model=settings.base_model,
                chat_template=settings.chat_template,
            )
        except ValueError as exc:
            choices[model.label] = ModelChoice("invalid", model_name=str(exc))
    return choices


def checked_choices(
    settings: Settings, models: Sequence[SweepModel], collect_only: bool, sdk_home: Path | None
) -> dict[str, ModelChoice]:
    """Each model's choice through the start-up checks of a one-model run."""
    from pytest_agenteval.plugin import checks

    return {
        model.label: checks.check_model(model_settings(settings, model), collect_only, sdk_home)
        for model in models
    }


def start_servers(
    config: pytest.Config, settings: Settings, models: Sequence[SweepModel], say: Any
) -> dict[str, ModelChoice]:
    """`--serve` in a sweep (plugin/sweep_servers.py): the launched servers' choices, or {}
    where none can be launched (`--serve auto` without vLLM/SGLang and a GPU: in-process)."""
    from pytest_agenteval.plugin import hosts, sweep_servers

    hosts.refuse_remote_workers(config)  # the servers listen on this machine's loopback
    return sweep_servers.launch_sweep(config, settings, list(models), say)


def model_ready(choices: dict[str, ModelChoice]) -> Any:
    """`Runtime.model_ready` of a sweep whose later servers start in waves; None otherwise."""
    if not choices:
        return None
    from pytest_agenteval.plugin import sweep_servers

    return sweep_servers.model_ready(choices)


def worker_choices(
    settings: Settings, models: Sequence[SweepModel], workerinput: Any
) -> dict[str, ModelChoice]:
    """A worker's choices: a launched server's as the controller started it, else its own."""
    from pytest_agenteval.models.choice import served_choice

    choices = lazy_choices(settings, models)
    for label, served in (workerinput.get(WORKERINPUT_SERVED) or {}).items():
        choices[label] = served_choice(served)
    for label, reported in (workerinput.get(WORKERINPUT_REPORTED) or {}).items():
        if reported and label in choices:
            choices[label] = dataclasses.replace(choices[label], reported=tuple(reported))
    return choices


def fill_workerinput(workerinput: Any, models: Sequence[SweepModel], choices: dict[str, ModelChoice]) -> None:
    from pytest_agenteval.models.choice import served_data

    workerinput[WORKERINPUT_MODELS] = [[m.label, m.source] for m in models]
    # the models on servers this run launched (launch_sweep): as `served_choice` reads them
    workerinput[WORKERINPUT_SERVED] = {
        label: served_data(choice) for label, choice in choices.items() if choice.served is not None
    }
    workerinput[WORKERINPUT_REPORTED] = {
        label: [None if entry is None else dict(entry) for entry in choice.reported]
        for label, choice in choices.items()
        if choice.reported
    }


def choices_for(
    config: pytest.Config,
    settings: Settings,
    models: Sequence[SweepModel],
    evaluating: bool,
    sdk_home: Path | None,
    say: Any,
) -> dict[str, ModelChoice]:
    """Each model's choice, label -> choice in the sweep's order: a worker's from what the
    controller handed it; the controller's through every start-up check a one-model run
    has, for each model (and, with --serve, on the servers it launched)."""
    from pytest_agenteval.plugin import checks, hosts

    if hasattr(config, "workerinput"):
        return worker_choices(settings, models, config.workerinput)  # type: ignore[attr-defined]
    if not evaluating:
        return lazy_choices(settings, models)
    check_sweep(settings, models)
    collect_only = bool(config.option.collectonly)
    choices = checked_choices(settings, models, collect_only, sdk_home)
    checks.check_suite_options(settings)  # before a launch that may take minutes
    if not collect_only:
        checks.check_output(settings)
        checks.check_sandbox_level(settings)
        if settings.serve:
            choices = start_servers(config, settings, models, say) or choices
    for choice in choices.values():
        checks.check_native_style(settings, choice)
        hosts.check_concurrency(config, settings, choice)
    return choices


def configure(
    config: pytest.Config,
    settings: Settings,
    evaluating: bool,
    cache_dir: Any,
    say: Any,
    gates: Sequence[Any],
) -> tuple[Settings, dict[str, ModelChoice]]:
    """`pytest_configure`'s part: the settings (a glob naming one model is that model's
    one-model run) and a sweep's model choices ({} : not a sweep), markers registered."""
    models = models_of(config, settings, evaluating)
    settings = one_model_settings(settings, models)
    models = config.stash[MODELS] = models if len(models) > 1 else []
    config.stash[SWEEP_LABELS] = [m.label for m in models]  # what sequential mode draws from
    _check_gate_labels(gates, models)
    _check_paired_levels(gates, settings)
    register_markers(config, models)
    if not models:
        return settings, {}
    cache = cache_dir(config, settings)
    home = cache / "sdk-home" if cache is not None else None
    return settings, choices_for(config, settings, models, evaluating, home, say)


def _check_gate_labels(gates: Sequence[Any], models: Sequence[SweepModel]) -> None:
    """A gate naming a model this run does not evaluate (or any model, in a one-model run):
    one start-up line listing the labels, before a server is launched."""
    from pytest_agenteval.output.gate import GateError, check_gate_labels

    try:
        check_gate_labels(gates, [m.label for m in models])
    except GateError as exc:
        raise pytest.UsageError(str(exc)) from None


def _check_paired_levels(gates: Sequence[Any], settings: Settings) -> None:
    """A level on a gate comparing two models is decided by sequential mode's paired draws."""
    from pytest_agenteval.output.gate_confidence import paired_level_refusal

    for gate in gates:
        if (
            getattr(gate, "other", None) is not None
            and gate.confidence is not None
            and not settings.sequential
        ):
            raise pytest.UsageError(paired_level_refusal(gate.expression))
