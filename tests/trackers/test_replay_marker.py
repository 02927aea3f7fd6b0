"""A results file that was logged (it ends with a `"type": "tracker"` marker line) is still
a results file: `replay:` re-scores it, reading only its problem lines."""

from __future__ import annotations

import json

import pytest

from pytest_agenteval.output.trackers import markers
from tests.trackers.sweep_runs import prepare

ONE_MODEL = ["-p", "no:cacheprovider", "--dataset-path=sweep/problems.jsonl", "--mode=text-only", "--val-n=2"]


def _summary(path) -> dict:
    (summary,) = [json.loads(x) for x in path.read_text().splitlines() if '"type": "summary"' in x]
    return summary


def test_a_marked_results_file_replays_as_before(pytester: pytest.Pytester) -> None:
    prepare(pytester.path)
    first = pytester.runpytest_inprocess(
        *ONE_MODEL, "--model-path=replay:sweep/step-200.jsonl", "--agenteval-out=out/r-step-100.jsonl"
    )
    assert first.ret == 1  # some problems unsolved: the test item fails, the results file is written
    results = pytester.path / "out" / "r-step-100.jsonl"
    markers.append_markers(
        results, [markers.marker("wandb:p", "1qgiu3be", "step-100", 100, "d158b1522f733f65")]
    )
    again = pytester.runpytest_inprocess(
        *ONE_MODEL, "--model-path=replay:out/r-step-100.jsonl", "--agenteval-out=out/again.jsonl"
    )
    assert again.ret == first.ret, "\n".join(again.errlines + again.outlines[-5:])
    assert (
        _summary(pytester.path / "out" / "again.jsonl")["average_at_n"] == _summary(results)["average_at_n"]
    )
