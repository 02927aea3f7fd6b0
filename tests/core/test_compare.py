"""Baseline comparison: a paired bootstrap over shared problems decides a drop."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agenteval.api.records import GenerationRecord, ProblemRecord, Rollout, Score
from pytest_agenteval.output.compare import BaselineError, compare, load_baseline, paired_bootstrap
from tests.conftest import read_results, replay_rows, write_jsonl


def records(fractions: dict[str, float], n: int = 4) -> list[ProblemRecord]:
    out = []
    for index, (pid, fraction) in enumerate(fractions.items()):
        correct = round(fraction * n)
        generations = tuple(
            GenerationRecord(j, j, Rollout("t", "answer"), Score(j < correct, True)) for j in range(n)
        )
        out.append(ProblemRecord("aime25", pid, index, "p", 1, n, generations))
    return out


def test_identical_runs_have_a_zero_width_interval() -> None:
    scores = {str(i): (i % 4) / 4 for i in range(28)}
    assert paired_bootstrap(scores, scores) == (28, 0.375, 0.375, (0.0, 0.0))


def test_only_shared_problems_count() -> None:
    shared, old, new, _ = paired_bootstrap({"a": 1.0, "b": 0.0}, {"b": 1.0, "c": 1.0})
    assert (shared, old, new) == (1, 0.0, 1.0)


def test_a_consistent_drop_fails_and_noise_passes() -> None:
    baseline = {"aime25": {str(i): 0.75 for i in range(30)}}
    worse = compare("aime25", records({str(i): 0.25 for i in range(30)}), baseline, tolerance=0.05)
    assert (worse.passed, worse.diff, worse.ci95) == (False, -0.5, (-0.5, -0.5))
    mixed = {str(i): (0.5 if i % 2 else 1.0) for i in range(30)}  # mean 0.75: same as the baseline
    assert compare("aime25", records(mixed), baseline, tolerance=0.0).passed is True


def test_a_drop_within_the_tolerance_passes() -> None:
    baseline = {"aime25": {str(i): 0.5 for i in range(20)}}
    slightly = {str(i): (0.25 if i < 2 else 0.5) for i in range(20)}  # -0.025 on average
    result = compare("aime25", records(slightly), baseline, tolerance=0.05)
    assert result.passed is True and result.diff == pytest.approx(-0.025)


def test_no_shared_problems_fails_closed() -> None:
    result = compare("aime25", records({"x": 1.0}), {"aime25": {"y": 1.0}}, tolerance=0.0)
    assert (result.passed, result.reason) == (
        False,
        "no problems shared with the baseline: comparison fails closed",
    )


def test_bad_baseline_files(tmp_path: Path) -> None:
    with pytest.raises(BaselineError, match="no such file"):
        load_baseline(tmp_path / "missing.jsonl")
    (tmp_path / "empty.jsonl").write_text('{"type": "summary"}\n')
    with pytest.raises(BaselineError, match="no problem lines"):
        load_baseline(tmp_path / "empty.jsonl")


# 12 problems of our own (a + b): enough for the paired comparison to decide (stats.paired.MIN_PAIRED)
SUMS = [{"id": i, "problem": f"What is {i} + {i + 1}?", "answer": str(2 * i + 1)} for i in range(12)]
GOOD = {i: [f"\\boxed{{{2 * i + 1}}}"] * 2 for i in range(12)}


def test_compare_decides_the_exit_status(run_suite, pytester: pytest.Pytester) -> None:
    data = write_jsonl(pytester.path / "sums.jsonl", SUMS)
    good = write_jsonl(pytester.path / "good.jsonl", replay_rows(GOOD))
    bad = write_jsonl(pytester.path / "bad.jsonl", replay_rows({k: ["\\boxed{0}"] * 2 for k in GOOD}))
    _, baseline = run_suite(f"--model-path=replay:{good}", "--val-n=2", data=data, out="baseline.jsonl")
    same, _ = run_suite(
        f"--model-path=replay:{good}",
        "--val-n=2",
        f"--agenteval-compare={baseline}",
        data=data,
        out="same.jsonl",
    )
    assert same.ret == 0
    worse, out = run_suite(
        f"--model-path=replay:{bad}",
        "--val-n=2",
        f"--agenteval-compare={baseline}",
        data=data,
        out="worse.jsonl",
    )
    assert worse.ret == 1
    worse.stdout.fnmatch_lines(
        ["compare FAIL  aime25.average_at_n  (0.0000 vs 1.0000 on 12 shared problems*"]
    )
    _, (summary,) = read_results(out)
    assert summary["compare"]["passed"] is False and summary["compare"]["shared_problems"] == 12


def test_a_missing_baseline_is_a_usage_error(run_suite) -> None:
    result, _ = run_suite("--model-path=replay:x.jsonl", "--agenteval-compare=nope.jsonl")
    assert result.ret == 4
