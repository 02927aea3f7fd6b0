"""Which tracker runs a run's models go into: the models with a step share one run (the
run id given, else a new one), each model without a step gets its own, tagged."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agenteval.output.trackers.plan import ModelResults, plan_runs, single_model


def _model(label: str, step: int | None) -> ModelResults:
    summary = {"suite": "aime25", "average_at_n": 0.5, "model": {"name": label}, "config": {"seed": 1}}
    return ModelResults(label, step, (summary,), Path(f"out/aime25-{label}.jsonl"))


@pytest.mark.parametrize(
    ("models", "append_to", "runs"),
    [
        # (name, append_to, [(label, step)...]) per run
        ([("step-100", 100), ("step-200", 200)], "", [("aime25 sweep", "", ["step-100", "step-200"])]),
        ([("step-100", 100), ("step-200", 200)], "RUN", [("aime25 sweep", "RUN", ["step-100", "step-200"])]),
        (
            [("base", None), ("step-100", 100), ("step-200", 200)],
            "RUN",
            [("aime25 sweep", "RUN", ["step-100", "step-200"]), ("aime25 base", "", ["base"])],
        ),
        (
            [("base", None), ("other", None)],
            "RUN",
            [("aime25 base", "", ["base"]), ("aime25 other", "", ["other"])],
        ),
        ([("base", None)], "RUN", [("aime25 base", "RUN", ["base"])]),  # a lone model goes where asked
        ([("step-800", 800)], "", [("aime25 step-800", "", ["step-800"])]),
    ],
)
def test_the_runs_a_run_s_models_go_into(models: list, append_to: str, runs: list) -> None:
    planned = plan_runs([_model(label, step) for label, step in models], append_to)
    assert [(r.name, r.append_to, [m.label for m in r.models]) for r in planned] == runs


def test_a_model_of_its_own_run_is_tagged_with_its_label_and_its_identity_is_model() -> None:
    (base,) = plan_runs([_model("base", None)])
    assert base.tags["agenteval.model_label"] == "base"
    assert base.params["model/name"] == "base"
    (sweep,) = plan_runs([_model("step-1", 1), _model("step-2", 2)], report=Path("out/report.html"))
    assert (sweep.params["model/step-1/name"], sweep.params["model/step-2/name"]) == ("step-1", "step-2")
    assert sweep.files == (
        Path("out/aime25-step-1.jsonl"),
        Path("out/aime25-step-2.jsonl"),
        Path("out/report.html"),
    )


@pytest.mark.parametrize(
    ("model_paths", "label", "step"),
    [
        (["ckpts/step-800"], "step-800", 800),
        (["final@1200=ckpts/last"], "final", 1200),
        (["mine=org/model"], "mine", None),
        (["org/model"], "identity-label", None),  # no step: the identity's label
        ([], "identity-label", None),  # an endpoint
    ],
)
def test_a_one_model_run_s_label_and_step_come_from_its_model_path(
    model_paths: list, label: str, step: int | None
) -> None:
    summary = {
        "suite": "aime25",
        "model": {"label": "identity-label"},
        "config": {"model_paths": model_paths},
    }
    model = single_model([summary], None)
    assert (model.label, model.step) == (label, step)


def test_only_the_run_of_the_models_with_a_step_appends_to_swanlab_run_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_agenteval.output.trackers.send import append_to, child_environment
    from pytest_agenteval.output.trackers.targets import parse_target

    monkeypatch.setenv("SWANLAB_RUN_ID", "train-7")
    target = parse_target("swanlab:proj/exp")
    runs = plan_runs([_model("base", None), _model("step-100", 100)], append_to(target))
    assert [(r.append_to, [m.label for m in r.models]) for r in runs] == [
        ("train-7", ["step-100"]),
        ("", ["base"]),
    ]
    assert "SWANLAB_RUN_ID" not in child_environment()  # swanlab.init would apply it to every run


@pytest.mark.parametrize(
    ("uri", "models", "names"),
    [
        ("swanlab:proj/exp", [("base", None), ("step-100", 100)], ["exp", "exp base"]),
        ("swanlab:proj/exp", [("base", None), ("other", None)], ["exp base", "exp other"]),
        ("swanlab:proj/exp", [("base", None)], ["exp"]),
        ("swanlab:proj", [("base", None), ("step-100", 100)], ["aime25 step-100", "aime25 base"]),
    ],
)
def test_each_swanlab_run_has_a_name_of_its_own(uri: str, models: list, names: list) -> None:
    from pytest_agenteval.output.trackers.swanlab_run import run_name
    from pytest_agenteval.output.trackers.targets import parse_target

    runs = plan_runs([_model(label, step) for label, step in models])
    assert [run_name(parse_target(uri), run) for run in runs] == names
