"""End to end on the synthetic dataset: recorded outputs -> extract -> score -> metrics."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from pytest_agenteval.tasks.gaia import (
    GaiaItemResult,
    extract_final_answer,
    load_gaia,
    question_scorer,
    summarize_gaia,
    write_submission,
)


def _replayed(root: Path, synthetic: ModuleType, unordered: bool = False) -> dict[str, object]:
    replay = synthetic.write_replay(root / "replay.jsonl")
    texts = {
        row["problem_id"]: row["text"]
        for row in map(json.loads, replay.read_text(encoding="utf-8").splitlines())
    }
    keys = {synthetic.task_id("validation", s.key): s.key for s in synthetic.VALIDATION}
    verdicts, methods, results = {}, {}, []
    for task in load_gaia("validation", root):
        extracted = extract_final_answer(texts[task.task_id])
        assert task.final_answer is not None
        correct = question_scorer(extracted.answer, task.final_answer, unordered_lists=unordered)
        verdicts[keys[task.task_id]] = correct
        methods[keys[task.task_id]] = extracted.method
        results.append(GaiaItemResult(task.task_id, task.level, correct, 2, task.annotator_steps, 100, 1.0))
    return {"verdicts": verdicts, "methods": methods, "summary": summarize_gaia(results)}


def test_replayed_verdicts_are_the_expected_official_ones(gaia_root: Path, synthetic: ModuleType) -> None:
    assert _replayed(gaia_root, synthetic)["verdicts"] == synthetic.REPLAY_EXPECTED


def test_replay_uses_every_extraction_method(gaia_root: Path, synthetic: ModuleType) -> None:
    methods = _replayed(gaia_root, synthetic)["methods"]
    expected = {s.key: synthetic.REPLAY_METHODS.get(s.key, "final_answer") for s in synthetic.VALIDATION}
    assert methods == expected


def test_replayed_summary(gaia_root: Path, synthetic: ModuleType) -> None:
    summary = _replayed(gaia_root, synthetic)["summary"]
    assert isinstance(summary, dict)
    assert summary["accuracy"] == 8 / 12
    assert summary["per_level"] == {
        "1": {"correct": 4, "total": 5, "accuracy": 0.8},
        "2": {"correct": 3, "total": 4, "accuracy": 0.75},
        "3": {"correct": 1, "total": 3, "accuracy": 1 / 3},
    }
    assert summary["drop_rates"] == {
        "1->2": pytest.approx(0.0625),
        "2->3": pytest.approx(5 / 9),
    }
    # annotator steps of the correct tasks: 2, 3, 3, 3 | 4, 3, 6 | 7
    assert summary["mean_annotator_steps_correct"] == 31 / 8
    assert summary["mean_annotator_steps"] == 56 / 12  # 2+3+3+3+3 + 4+3+5+6 + 7+8+9


def test_unordered_option_turns_the_reversed_list_correct(
    make_gaia: Callable[..., Path], synthetic: ModuleType
) -> None:
    replayed = _replayed(make_gaia("jsonl"), synthetic, unordered=True)
    assert replayed["verdicts"] == synthetic.REPLAY_EXPECTED_UNORDERED


def test_test_split_becomes_a_submission(make_gaia: Callable[..., Path], tmp_path: Path) -> None:
    tasks = load_gaia("test", make_gaia("parquet"))
    outputs = {task.task_id: f"Thinking about {task.task_id}\nFINAL ANSWER: 7" for task in tasks}
    rows = [
        (task.task_id, extract_final_answer(outputs[task.task_id]).answer, outputs[task.task_id])
        for task in tasks
    ]
    path = write_submission(tmp_path / "submission.jsonl", rows)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [line["task_id"] for line in lines] == [task.task_id for task in tasks]
    assert {line["model_answer"] for line in lines} == {"7"}
