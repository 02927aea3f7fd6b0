"""Loading generated problems: repairs recorded, unloadable lines counted, duplicate ids
refused; the answer-format check; near-duplicates; seeded topic-matched pairing."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agenteval.tasks.datagen import (
    answer_format,
    load_generated,
    nearest_reference,
    shingles,
    topic_marker,
)
from pytest_agenteval.tasks.datagen._pairing import pair_opponents, shown_fields
from pytest_agenteval.tasks.datagen.data import DatagenDataError, ReferenceProblem


def write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "gen.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_unescaped_latex_loads_and_the_repairs_are_recorded(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '{"problem_id": "p1", "problem": "Find \\frac{14}{2}.", "answer": "7", '
        '"solution": "\\frac{14}{2} = \\boxed{7}", "topic": "Algebra"}',
    )
    report = load_generated(path)
    (item,) = report.problems
    assert item.problem == "Find \\frac{14}{2}." and item.solution == "\\frac{14}{2} = \\boxed{7}"
    assert [r["command"] for r in item.repairs] == ["\\frac", "\\frac", "\\boxed"]
    assert item.marker == "algebra" and report.repaired_items == 1 and item.line == 1


def test_an_unloadable_line_is_counted_and_the_rest_loads(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '{"problem": "What is 1+1?", "answer": "2"}',
        '{"problem": "cut off',
        "",
        '{"problem": "no answer here"}',
        "[1, 2]",
        '{"problem": "What is 2+2?", "answer": "4", "topic": "number theory"}',
    )
    report = load_generated(path)
    assert [p.problem_id for p in report.problems] == ["gen-1", "gen-6"]
    assert [e["line"] for e in report.load_errors] == [2, 4, 5]
    assert report.load_errors[1]["reason"] == "missing answer"
    assert report.problems[1].marker == "number_theory"


def test_a_duplicate_id_is_refused_with_both_lines(tmp_path: Path) -> None:
    path = write(
        tmp_path, '{"id": "a", "problem": "x", "answer": "1"}', '{"id": "a", "problem": "y", "answer": "2"}'
    )
    with pytest.raises(DatagenDataError, match=r"gen.jsonl:2: duplicate problem id 'a' \(first on line 1\)"):
        load_generated(path)


def test_a_file_with_nothing_loadable_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DatagenDataError, match="no loadable problems"):
        load_generated(write(tmp_path, "not json"))


@pytest.mark.parametrize(
    ("answer", "ok", "value"),
    [
        ("042", True, 42),
        ("0", True, 0),
        ("999", True, 999),
        ("1000", False, 1000),
        ("-1", False, -1),
        ("3.5", False, None),
        ("\\boxed{12}", True, 12),
        ("$12$", True, 12),
        ("twelve", False, None),
    ],
)
def test_answer_format_is_the_aime_rule(answer: str, ok: bool, value: int | None) -> None:
    result = answer_format(answer)
    assert (result["ok"], result["value"]) == (ok, value)


def test_near_duplicate_of_a_reference_is_found() -> None:
    pool = [("r1", shingles("Find the number of ordered pairs of integers (x, y) with x^2 + y^2 = 25.")),
            ("r2", shingles("A circle has radius 7. Find its area divided by pi."))]  # fmt: skip
    copy = nearest_reference("Find the number of ordered pairs of integers (x,y) with x^2 + y^2 = 25 .", pool)
    assert copy["nearest_reference"] == "r1" and copy["near_duplicate"] is True
    fresh = nearest_reference("How many primes are below 100?", pool)
    assert fresh["near_duplicate"] is False


def refs(*topics: str) -> list[ReferenceProblem]:
    return [ReferenceProblem(f"r{i}", f"ref {i}", "1", "", t) for i, t in enumerate(topics)]


def test_pairing_is_topic_matched_balanced_and_seeded(tmp_path: Path) -> None:
    lines = [f'{{"id": "g{i}", "problem": "p{i}", "answer": "1", "topic": "{t}"}}' for i, t in
             enumerate(["algebra", "algebra", "algebra", "geometry", "combinatorics"])]  # fmt: skip
    problems = load_generated(write(tmp_path, *lines)).problems
    references = refs("algebra", "algebra", "geometry", "probability")
    pairs = pair_opponents(problems, references, k=1, seed=5)
    algebra = [pairs[f"g{i}"].references[0].problem_id for i in range(3)]
    assert set(algebra) == {"r0", "r1"} and sorted(algebra).count("r0") in (1, 2)  # balanced reuse
    assert pairs["g3"].references[0].problem_id == "r2" and pairs["g3"].topic_matched
    assert not pairs["g4"].topic_matched  # no combinatorics reference: drawn from all
    assert pair_opponents(problems, references, k=1, seed=5) == pairs
    assert pair_opponents(problems, references, k=2, seed=5)["g0"].references[0] != \
        pair_opponents(problems, references, k=2, seed=5)["g0"].references[1]  # fmt: skip


def test_only_fields_both_sides_have_are_shown(tmp_path: Path) -> None:
    line = '{"id": "g", "problem": "p", "answer": "1", "solution": "s", "topic": "algebra"}'
    (item,) = load_generated(write(tmp_path, line)).problems
    assert shown_fields(item, ReferenceProblem("r", "q", "2")) == ("problem", "answer")
    assert shown_fields(item, ReferenceProblem("r", "q", "2", "sol")) == ("problem", "answer", "solution")


@pytest.mark.parametrize(
    ("topic", "marker"),
    [
        ("Number Theory", "number_theory"),
        ("geometry", "geometry"),
        ("Calculus", "other_topic"),
        ("", "other_topic"),
    ],
)
def test_topic_markers(topic: str, marker: str) -> None:
    assert topic_marker(topic) == marker
