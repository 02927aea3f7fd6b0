"""A sweep model's training step: from its label, or `LABEL@STEP=PATH`."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agenteval.models.steps import split_step, step_of
from pytest_agenteval.models.sweep import expand_model_paths


@pytest.mark.parametrize(
    ("label", "step"),
    [
        ("step-200", 200),
        ("global_step_200", 200),
        ("ckpt-200", 200),
        ("iter_0000200", 200),
        ("checkpoint-1500", 1500),
        ("step200", 200),
        ("run3-step-40", 40),
        ("Step_7", 7),
        ("base", None),
        ("qwen3-8b", None),
        ("steps-200", None),  # not the word `step`
        ("footstep-3", None),
        ("step-200-rc1", None),  # the step must end the label
    ],
)
def test_the_step_a_label_names(label: str, step: int | None) -> None:
    assert step_of(label) == step


@pytest.mark.parametrize(
    ("given", "split"),
    [
        ("base@0", ("base", 0)),
        ("rl-a@1200", ("rl-a", 1200)),
        ("base", ("base", None)),
        ("a@b", ("a@b", None)),
    ],
)
def test_a_step_given_after_the_label(given: str, split: tuple) -> None:
    assert split_step(given) == split


def test_the_sweep_spec_takes_a_step_and_the_labels_give_the_others(tmp_path: Path) -> None:
    for name in ("step-100", "step-300"):
        (tmp_path / name).mkdir()
    models = expand_model_paths([f"base@0={tmp_path / 'x'}", str(tmp_path / "step-*"), "final@900=org/model"])
    assert [(m.label, m.source, m.step) for m in models] == [
        ("base", str(tmp_path / "x"), 0),
        ("step-100", str(tmp_path / "step-100"), 100),
        ("step-300", str(tmp_path / "step-300"), 300),
        ("final", "org/model", 900),
    ]


def test_a_bad_label_before_the_step_is_still_refused() -> None:
    with pytest.raises(ValueError, match="label 'a b@100=x' has characters"):
        expand_model_paths(["a b@100=x"])
