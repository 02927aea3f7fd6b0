"""Two labels whose `model_<label>` markers are one (`step-200`, `step_200`, `step.200`) are
refused at start-up: `-m model_step_200` would select both models."""

from __future__ import annotations

import pytest

from pytest_agenteval.models.sweep import expand_model_paths

ROOT = "replay:docs/examples/sweep/"


@pytest.mark.parametrize(
    ("labels", "error"),
    [
        (
            ("step-200", "step_200"),
            "--model-path: the labels 'step-200' and 'step_200' share the marker model_step_200 "
            "(-m would select both); rename one with --model-path LABEL=PATH",
        ),
        (
            ("base", "step.200", "step-200"),
            "--model-path: the labels 'step.200' and 'step-200' share the marker model_step_200 "
            "(-m would select both); rename one with --model-path LABEL=PATH",
        ),
        (("step-200", "step-2000"), None),
    ],
)
def test_labels_with_one_marker_are_refused(labels: tuple[str, ...], error: str | None) -> None:
    values = [f"{label}={ROOT}base.jsonl" for label in labels]
    if error is None:
        assert [m.label for m in expand_model_paths(values)] == list(labels)
        return
    with pytest.raises(ValueError) as caught:
        expand_model_paths(values)
    assert str(caught.value) == error
