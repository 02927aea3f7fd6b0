"""The GAIA lines of the terminal summary never print Python's `None`: a run with no
correct item printed `mean steps   agent None vs annotators None (correct items)`."""

from __future__ import annotations

import pytest

from pytest_agenteval.tasks.gaia.suite import Gaia


@pytest.mark.parametrize(
    ("steps", "shown"),
    [
        ((None, None), "n/a (no correct item with steps)"),
        ((3.0, None), "agent 3.0 vs annotators n/a (correct items)"),
        ((2.5, 4.25), "agent 2.5 vs annotators 4.2 (correct items)"),
    ],
)
def test_mean_steps_without_none(steps: tuple, shown: str) -> None:
    summary = {
        "accuracy": 0.0,
        "correct": 0,
        "scored": 1,
        "per_level": {},
        "drop_rates": {},
        "mean_steps_correct": steps[0],
        "mean_annotator_steps_correct": steps[1],
    }
    rows = dict(Gaia().summary_rows(summary))
    assert rows["mean steps"] == shown
    assert not any("None" in value for value in rows.values()), rows
