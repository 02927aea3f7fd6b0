"""The merge's memory is bounded by its packed records: it holds each problem's line packed
(without texts, pickled, compressed), and unpacks a record's generations only while it
reads them, one record at a time (benchmarks/merge_scale.py measures what that saves).
Tested on the mechanism, never on a measured size: how many generation records are alive
at once while a real merge of real shards runs in this process."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.api.records import problem_from_dict
from pytest_agenteval.output import merge
from tests.conftest import SUITE_FILE, write_jsonl

from .conftest import lines, run_pytest

PROBLEMS = 24  # more than a bounded merge ever holds unpacked at once
SAMPLES = 3
ERRORED = 5  # no recorded generation: an errored, incomplete record
BOUND = 6  # the merge's few unpacked records (its small cache, the one being read)


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("memory")
    (folder / "test_tiny.py").write_text(SUITE_FILE)
    write_jsonl(
        folder / "tiny.jsonl",
        [{"id": p, "problem": f"What is {p} + {p}?", "answer": str(2 * p)} for p in range(PROBLEMS)],
    )
    write_jsonl(
        folder / "replay.jsonl",
        [
            {"problem_id": p, "sample_index": j, "text": f"so \\boxed{{{2 * p if j <= p % SAMPLES else 1}}}"}
            for p in range(PROBLEMS)
            if p != ERRORED
            for j in range(SAMPLES)
        ],
    )
    for index in range(2):
        run_pytest(
            folder,
            "--dataset-path=tiny.jsonl",
            "--mode=text-only",
            "--model-path=replay:replay.jsonl",
            f"--val-n={SAMPLES}",
            f"--agenteval-shard={index}/2",
            f"--agenteval-out=s{index}.jsonl",
        )
    return folder


def test_a_merge_never_holds_more_than_a_few_problems_generations(
    shards: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each generation record the merge makes (a line decoded, a packed record unpacked) is
    followed to its end; at each new record, the live ones are counted."""
    live: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
    most = made = 0

    def followed(make: Any) -> Any:
        def wrapped(*args: Any) -> Any:
            nonlocal most, made
            record = make(*args)
            for generation in record.generations:
                live[id(generation)] = generation
            made += 1
            most = max(most, len(live))
            return record

        return wrapped

    monkeypatch.setattr(merge, "problem_from_dict", followed(merge.problem_from_dict))
    if hasattr(merge, "_unpacked"):  # the packed records' own reader
        monkeypatch.setattr(merge, "_unpacked", followed(merge._unpacked))
    handed: list[Any] = []
    write_junit = merge.ci.write_junit
    monkeypatch.setattr(
        merge.ci,
        "write_junit",
        lambda path, items, *rest: write_junit(path, handed.append(items) or items, *rest),
    )
    monkeypatch.chdir(shards)
    status = merge.main(["s0.jsonl", "s1.jsonl", "-o", "merged.jsonl", "--junitxml=merged.xml"])

    problems, summaries = lines(shards / "merged.jsonl")
    assert (status, len(problems), summaries[0]["problems"]) == (1, PROBLEMS, PROBLEMS - 1)
    assert most <= BOUND * SAMPLES  # the unbounded merge held every problem's at once
    assert made > 3 * PROBLEMS  # yet read many times over: the summary's passes, the file, JUnit
    assert not isinstance(handed[0], Sequence)  # JUnit gets one record's line at a time, not a list
    assert (shards / "merged.xml").read_text().count("<testcase ") == PROBLEMS


RECORD = {
    "type": "problem",
    "suite": "aime25",
    "problem_id": 7,
    "index": 7,
    "nodeid": "test_tiny.py::test_aime25[7]",
    "markers": ["aime25"],
    "problem": "What is 7 + 7?",
    "ground_truth": "14",
    "prompt_hash": "42a71e5598479d80",
    "val_n": 3,
    "num_correct": 1,
    "pass_at_n": True,
    "complete": True,
    "error": None,
    "category": "algebra",
    "generations": [
        {
            "sample_index": j,
            "seed": 11 + j,
            "text": "",
            "correct": j == 1,
            "formatted": True,
            "answer": str(j),
        }
        for j in range(3)
    ],
}


@pytest.mark.parametrize(
    "line",
    [
        RECORD,
        {**RECORD, "generations": RECORD["generations"][:2], "error": "no recorded generation"},
        {**RECORD, "generations": RECORD["generations"][:2]},
        {**RECORD, "generations": [], "error": "timed out"},
    ],
    ids=["complete", "errored", "short", "nothing"],
)
def test_a_packed_record_reads_as_the_unpacked_one(line: dict[str, Any]) -> None:
    unpacked = problem_from_dict(line, ("category",))
    packed = merge.PackedProblem(unpacked, (0, 0, 1))
    assert packed.to_dict() == unpacked.to_dict()
    assert (packed.num_correct, packed.passed, packed.complete, len(packed.generations)) == (
        unpacked.num_correct,
        unpacked.passed,
        unpacked.complete,
        len(unpacked.generations),
    )
    assert list(packed.generations) == list(unpacked.generations)
    assert [packed.generations[i] for i in range(len(line["generations"]))] == list(unpacked.generations)
