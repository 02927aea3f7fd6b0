"""The leaderboard submission JSONL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agenteval.tasks.gaia import write_submission


def _lines(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_one_line_per_task_with_the_leaderboard_fields(tmp_path: Path) -> None:
    path = write_submission(
        tmp_path / "submission.jsonl",
        [("t1", "Paris", "searched the web"), ("t2", "17", "counted")],
    )
    assert path == tmp_path / "submission.jsonl"
    assert _lines(path) == [
        {"task_id": "t1", "model_answer": "Paris", "reasoning_trace": "searched the web"},
        {"task_id": "t2", "model_answer": "17", "reasoning_trace": "counted"},
    ]


def test_missing_answer_is_an_empty_string_and_missing_trace_is_left_out(tmp_path: Path) -> None:
    path = write_submission(tmp_path / "s.jsonl", [("t1", None, None)])
    assert path.read_text(encoding="utf-8") == '{"task_id": "t1", "model_answer": ""}\n'


def test_non_ascii_is_written_as_is(tmp_path: Path) -> None:
    path = write_submission(tmp_path / "s.jsonl", [("t1", "北京", "推理")])
    assert "北京" in path.read_text(encoding="utf-8")


def test_parent_folders_are_created(tmp_path: Path) -> None:
    path = write_submission(tmp_path / "a" / "b" / "s.jsonl", [("t1", "x", None)])
    assert _lines(path) == [{"task_id": "t1", "model_answer": "x"}]


def test_an_existing_file_is_replaced_whole(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("old\nold\nold\n", encoding="utf-8")
    write_submission(path, [("t1", "x", None)])
    assert _lines(path) == [{"task_id": "t1", "model_answer": "x"}]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([("t1", "a", None), ("t1", "b", None)], "GAIA submission has task_id 't1' twice"),
        ([("", "a", None)], "GAIA submission row with an empty task_id"),
    ],
)
def test_bad_rows_write_nothing(tmp_path: Path, rows: list[tuple[str, str, None]], message: str) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("previous\n", encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        write_submission(path, rows)
    assert path.read_text(encoding="utf-8") == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


def test_empty_submission_is_an_empty_file(tmp_path: Path) -> None:
    assert write_submission(tmp_path / "s.jsonl", []).read_text(encoding="utf-8") == ""
