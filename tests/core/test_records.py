"""Records survive the trip through JSON; seeds depend only on (seed, problem, j)."""

from __future__ import annotations

import json

from pytest_agenteval.api.records import (
    GenerationRecord,
    ProblemRecord,
    Rollout,
    Score,
    problem_from_dict,
    sample_seed,
)


def test_problem_record_round_trips_through_json() -> None:
    generation = GenerationRecord(
        1,
        99,
        Rollout(
            "t \\boxed{7}",
            "answer",
            turns=2,
            code_calls=1,
            attempts=3,
            retries=2,
            transcript=({"role": "assistant", "content": "x"},),
            extra={"stop_detail": "ok"},
        ),
        Score(True, True, 7, {"predicted_answer": 7, "boxed_answer": "7"}),
    )
    original = ProblemRecord("aime25", 4, 4, "p", 7, 1, (generation,), ("aime25",), None, "n::id", "h")
    data = json.loads(json.dumps(original.to_dict()))
    assert data["generations"][0]["predicted_answer"] == 7
    restored = problem_from_dict(data, ("predicted_answer", "boxed_answer"))
    assert restored == original


def test_problem_line_has_the_seed_fields() -> None:
    record = ProblemRecord("aime25", 0, 0, "p", 70, 2, ())
    assert {
        "type",
        "problem_id",
        "problem",
        "ground_truth",
        "val_n",
        "num_correct",
        "pass_at_n",
        "generations",
    } <= record.to_dict().keys()
    assert record.complete is False  # 0 of 2 generations: never silently averaged


def test_sample_seed_is_stable_and_distinct() -> None:
    assert (
        sample_seed(42, 0, 0) == sample_seed(42, 0, 0) == 51072364
    )  # pinned: changing it changes every run's samples
    seeds = {sample_seed(42, pid, j) for pid in range(30) for j in range(12)}
    assert len(seeds) == 360
    assert sample_seed(42, 0, 1) != sample_seed(43, 0, 1)
    assert all(0 <= s < 2**31 for s in seeds)
