"""The verification store: the seed's keys, revisions against a second writer, history,
validation, the suite's human summary, and the review order from a results file."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from pytest_agenteval.report.review import ReviewState, disagreement_order
from pytest_agenteval.tasks.datagen import apply_verification, human_summary, verifications_path
from pytest_agenteval.tasks.datagen.human import Conflict, InvalidVerification

NOW = datetime(2026, 12, 1, 12, 0, 9, tzinfo=timezone(timedelta(hours=8)))
SCORES = {"correctness": 4, "clarity": 5, "difficulty_match": 3, "completeness": 4}


def save(store: dict, base: int, **payload) -> dict:
    body = {"scores": SCORES, "status": "approved", "comments": "", "base_revision": base, **payload}
    return apply_verification(store, "g1", body, item_sha256="abc", annotator="ann", now=NOW)


def test_an_entry_has_the_seed_keys_and_ours() -> None:
    entry = save({}, 0, comments="好", time_spent_s=3.5)
    assert entry == {
        "problem_id": "g1",
        "scores": SCORES,
        "total_score": 4.0,
        "status": "approved",
        "comments": "好",
        "verified_at": "2026-12-01T12:00:09+08:00",
        "annotator": "ann",
        "item_sha256": "abc",
        "revision": 1,
        "schema_version": 1,
        "time_spent_s": 3.5,
        "history": [],
    }


def test_a_stale_revision_is_a_conflict_and_an_edit_keeps_history() -> None:
    store: dict = {}
    save(store, 0)
    with pytest.raises(Conflict):
        save(store, 0, status="rejected")  # a second tab that read revision 0
    edited = save(store, 1, status="rejected")
    assert (edited["revision"], edited["status"]) == (2, "rejected")
    assert [(h["revision"], h["status"]) for h in edited["history"]] == [(1, "approved")]


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        ({"scores": {**SCORES, "clarity": 6}}, "scores.clarity must be an integer 1-5"),
        ({"scores": {**SCORES, "clarity": True}}, "scores.clarity must be an integer 1-5"),
        ({"scores": {"correctness": 4}}, "scores must hold exactly"),
        ({"status": "maybe"}, "status must be one of approved, rejected, needs_revision"),
        ({"comments": 5}, "comments must be a string"),
    ],
)
def test_bad_verifications_are_refused(payload: dict, error: str) -> None:
    with pytest.raises(InvalidVerification, match=error):
        save({}, 0, **payload)


def test_human_summary_counts_approval_and_stale_entries(tmp_path: Path) -> None:
    path = verifications_path(tmp_path / "generated.jsonl")
    assert path.name == "generated_verifications.json"
    assert human_summary(path, {"g1": "abc"}) is None
    store: dict = {}
    save(store, 0)
    store["g2"] = dict(store["g1"], problem_id="g2", status="rejected", item_sha256="old")
    store["other"] = dict(store["g1"], problem_id="other")  # not in this data
    path.write_text(json.dumps(store), encoding="utf-8")
    summary = human_summary(path, {"g1": "abc", "g2": "new", "g3": "x"})
    assert (summary["verified"], summary["coverage"], summary["approved_rate"]) == (2, 2 / 3, 0.5)
    assert summary["stale"] == ["g2"] and summary["annotators"] == ["ann"]


def test_the_review_order_puts_the_panels_disagreements_first(tmp_path: Path) -> None:
    data = tmp_path / "generated.jsonl"
    data.write_text("".join(json.dumps({"id": i, "problem": "p", "answer": "1"}) + "\n" for i in "abcd"))
    results = tmp_path / "run.jsonl"
    summary = {"type": "summary", "suite": "datagen", "panel": {"review_order": ["c", "a"]}}
    results.write_text(json.dumps({"type": "problem"}) + "\n" + json.dumps(summary) + "\n")
    order = disagreement_order(results)
    state = ReviewState(data, verifications_path(data), "ann", order)
    assert [item["id"] for item in state.items] == ["c", "a", "b", "d"]
    results.write_text(json.dumps({"type": "summary", "suite": "aime25"}) + "\n")
    with pytest.raises(ValueError, match="no datagen summary line"):
        disagreement_order(results)


def test_each_judge_is_compared_with_the_human(tmp_path: Path) -> None:
    from pytest_agenteval.tasks.datagen.human import agreement_with_judges

    def sc(v: int) -> dict[str, int]:
        return dict.fromkeys(SCORES, v)

    path = tmp_path / "v.json"
    human = {"g1": 2, "g2": 4, "g3": 5}
    path.write_text(json.dumps({k: {"problem_id": k, "scores": sc(v)} for k, v in human.items()}))
    table = {
        "g1": {"same": sc(2), "plus1": sc(3)},
        "g2": {"same": sc(4), "plus1": sc(5)},
        "g3": {"same": sc(5), "plus1": None},  # invalid verdict: not compared
    }
    out = agreement_with_judges(path, table)
    assert (
        out["same"]["items"] == 3 and out["same"]["alpha_mean"] == 1.0 and out["same"]["mean_offset"] == 0.0
    )
    assert out["plus1"]["items"] == 2 and out["plus1"]["mean_offset"] == 1.0
    assert out["plus1"]["alpha_mean"] < 1.0
