"""The GAIA suite through pytest on a synthetic GAIA-format data set: per-level accuracy
and drop rates from replayed answers, level markers, skips without access, the test-split
submission, a user's own agent, and the default agent on the embedded model."""

from __future__ import annotations

import json

import pytest

from pytest_agenteval.tasks.gaia import load_gaia
from tests.conftest import forget_the_xdist_worker, read_results, write_jsonl
from tests.gaia import make_synthetic

SUITE = """
from pytest_agenteval.tasks.gaia.suite import Gaia

agenteval_suite = Gaia()


def test_gaia(evaluation):
    evaluation.check()
"""

USER_AGENT = """
import pytest
from pytest_agenteval.tasks.gaia import AgentResult

CALLS = []


@pytest.fixture(scope="session")
def agenteval_agent():
    async def agent(task):
        CALLS.append(task.task_id)
        return AgentResult(answer=f"I looked it up. FINAL ANSWER: {task.final_answer}", steps=3,
                           trajectory=[{"role": "assistant", "content": "searching"}],
                           prompt_tokens=10, completion_tokens=5)
    return agent
"""


@pytest.fixture
def gaia(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_gaia=SUITE)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "--agenteval-out=r.jsonl", *args)


@pytest.mark.parametrize("layout", ["parquet", "jsonl"])
def test_replay_gives_per_level_accuracy_and_drop_rates(gaia: pytest.Pytester, layout: str) -> None:
    root = make_synthetic.make_synthetic_gaia(gaia.path / "GAIA", layout)
    replay = make_synthetic.write_replay(gaia.path / "replay.jsonl")
    result = run(gaia, f"--gaia-path={root}", f"--model-path=replay:{replay}")
    result.assert_outcomes(passed=8, failed=4)
    problems, (summary,) = read_results(gaia.path / "r.jsonl")
    assert {p["problem_id"]: p["pass_at_n"] for p in problems} == {
        make_synthetic.task_id("validation", key): verdict
        for key, verdict in make_synthetic.REPLAY_EXPECTED.items()
    }
    levels = {level: (v["correct"], v["total"]) for level, v in summary["per_level"].items()}
    assert levels == {"1": (4, 5), "2": (3, 4), "3": (1, 3)}
    assert summary["drop_rates"]["1->2"] == pytest.approx((0.8 - 0.75) / 0.8)
    assert summary["drop_rates"]["2->3"] == pytest.approx((0.75 - 1 / 3) / 0.75)
    assert (summary["accuracy"], summary["list_order"]) == (8 / 12, "ordered (official)")


def test_unordered_lists_option_is_recorded(gaia: pytest.Pytester) -> None:
    root = make_synthetic.make_synthetic_gaia(gaia.path / "GAIA")
    replay = make_synthetic.write_replay(gaia.path / "replay.jsonl")
    result = run(gaia, f"--gaia-path={root}", f"--model-path=replay:{replay}", "--gaia-unordered-lists")
    result.assert_outcomes(passed=9, failed=3)
    _, (summary,) = read_results(gaia.path / "r.jsonl")
    assert summary["list_order"] == "unordered"


def test_level_marker_selects_level_one_only(gaia: pytest.Pytester) -> None:
    root = make_synthetic.make_synthetic_gaia(gaia.path / "GAIA")
    replay = make_synthetic.write_replay(gaia.path / "replay.jsonl")
    result = run(gaia, f"--gaia-path={root}", f"--model-path=replay:{replay}", "-m", "level1")
    result.assert_outcomes(passed=4, failed=1, deselected=7)
    _, (summary,) = read_results(gaia.path / "r.jsonl")
    assert list(summary["per_level"]) == ["1"] and summary["drop_rates"]["1->2"] is None


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (
            (),
            "GAIA is gated: accept the terms at https://huggingface.co/datasets/gaia-benchmark/GAIA and set "
            "HF_TOKEN, or pass --gaia-path DIR",
        ),
        (
            ("--gaia-path=empty",),
            "no GAIA metadata for the validation split under empty: expected "
            "2023/validation/metadata.parquet or metadata.jsonl",
        ),  # a folder without GAIA's files
        (("-m", "level1"), "GAIA is gated"),  # the skip is not deselected away
    ],
)
def test_no_access_skips_with_one_line(gaia: pytest.Pytester, monkeypatch, args: tuple, reason: str) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(gaia.path / "hf"))  # no stored login token either
    (gaia.path / "empty").mkdir()
    result = run(gaia, "-rs", *args)
    result.assert_outcomes(skipped=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines([f"SKIPPED*GAIA unavailable: {reason}*"])


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_missing_gaia_path_is_a_usage_error(gaia: pytest.Pytester, monkeypatch, workers: str) -> None:
    """A typo in --gaia-path stops the run at start-up, as --dataset-path does; it used to
    skip every item with exit status 0."""
    forget_the_xdist_worker(monkeypatch)
    result = run(gaia, "--gaia-path=GAIA-typo", "-n", workers)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.errlines if line.startswith("ERROR")] == [
        "ERROR: --gaia-path GAIA-typo: no such folder; give the local GAIA dataset folder, or omit "
        "--gaia-path for the gated hub dataset (with HF_TOKEN)"
    ]
    assert "skipped" not in result.stdout.str()


def test_test_split_writes_the_leaderboard_submission(gaia: pytest.Pytester) -> None:
    root = make_synthetic.make_synthetic_gaia(gaia.path / "GAIA")
    tasks = load_gaia("test", root)
    replay = write_jsonl(
        gaia.path / "replay.jsonl",
        [
            {"problem_id": t.task_id, "sample_index": 0, "text": f"Thinking.\nFINAL ANSWER: [{i}]"}
            for i, t in enumerate(tasks)
        ],
    )
    result = run(
        gaia,
        f"--gaia-path={root}",
        f"--model-path=replay:{replay}",
        "--gaia-split=test",
        "--gaia-submission=submission.jsonl",
    )
    assert result.ret == 0
    rows = [json.loads(line) for line in (gaia.path / "submission.jsonl").read_text().splitlines()]
    assert [(r["task_id"], r["model_answer"]) for r in rows] == [
        (t.task_id, str(i)) for i, t in enumerate(tasks)
    ]
    assert rows[0]["reasoning_trace"] == "Thinking.\nFINAL ANSWER: [0]"
    _, (summary,) = read_results(gaia.path / "r.jsonl")
    assert (summary["scored"], summary["submission"]) == (0, "submission.jsonl")


def test_a_user_agent_from_conftest_is_the_system_under_test(gaia: pytest.Pytester) -> None:
    gaia.makeconftest(USER_AGENT)
    root = make_synthetic.make_synthetic_gaia(gaia.path / "GAIA")
    result = run(gaia, f"--gaia-path={root}", "-n", "2")
    result.assert_outcomes(passed=12)
    problems, (summary,) = read_results(gaia.path / "r.jsonl")
    assert all(p["generations"][0]["agent"] == "agenteval_agent.<locals>.agent" for p in problems)
    assert (summary["accuracy"], summary["mean_steps_correct"], summary["tokens_total"]) == (1.0, 3.0, 180)


def test_default_agent_runs_on_the_embedded_model(gaia: pytest.Pytester) -> None:
    root = make_synthetic.make_synthetic_gaia(gaia.path / "GAIA")
    result = run(gaia, f"--gaia-path={root}", "--limit=2", "--max-assistant-tokens=32", "--gaia-max-steps=2")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 2
    problems, (summary,) = read_results(gaia.path / "r.jsonl")
    generation = problems[0]["generations"][0]
    assert generation["text"] and generation["extraction"] in (
        "final_answer",
        "answer_label",
        "last_line",
        "none",
    )
    assert summary["model"]["backend"] == "embedded" and summary["temperature"] == 0.0
