"""Nothing scored reads `n/a (<reason>)`, never a score of 0.000, and an incomplete run is
flagged in the terminal summary, the JSONL summary, the job summary and JUnit (issue 25
item 2); the report side is tests/reporting/test_report_incomplete.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agenteval.tasks.bfcl._metrics import summarize_bfcl
from pytest_agenteval.tasks.bfcl.suite import Bfcl
from pytest_agenteval.tasks.gaia._metrics import GaiaItemResult, summarize_gaia
from pytest_agenteval.tasks.gaia.suite import Gaia
from tests.conftest import read_results, replay_rows, write_jsonl

WHY = "0 of 2 problems scored: 2 errored, 0 missing"
GATE = ("--agenteval-gate", "aime25.average_at_n >= 0")


@pytest.mark.parametrize("workers", ["0", "2"])
def test_an_all_errored_run_is_n_a_and_incomplete_in_every_output(
    run_suite, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: str
) -> None:
    # only problem 3 was recorded: problems 0 and 1 (--limit=2) error in every generation
    replay = write_jsonl(pytester.path / "replay.jsonl", replay_rows({3: ["\\boxed{87}"]}))
    step = pytester.path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    result, out = run_suite(
        f"--model-path=replay:{replay}", "--val-n=2", "--limit=2", "-n", workers, *GATE
    )  # fmt: skip
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "aime25",
            "  INCOMPLETE: 2 of 2 problems errored, 0 missing",
            "  model          replay-replay (replay)",
            "  problems       0 scored, 2 errored, 0 missing (INCOMPLETE)",
            "  generations    0 (N=2)",
            f"  average@N      n/a ({WHY})",
            f"  pass@N         n/a ({WHY})",
            f"  maj@N          n/a ({WHY})",
            f"  format         n/a ({WHY})",
        ],
        consecutive=True,
    )
    result.stdout.fnmatch_lines(
        [f"gate FAIL  aime25.average_at_n >= 0  (average_at_n is n/a ({WHY}): gates fail closed)"]
    )
    assert "0.000" not in result.stdout.str()
    _, (summary,) = read_results(out)
    assert {k: summary[k] for k in ("average_at_n", "pass_at_n", "maj_at_n", "format_rate", "ci95")} == {
        "average_at_n": None,
        "pass_at_n": None,
        "maj_at_n": None,
        "format_rate": None,
        "ci95": dict.fromkeys(("average_at_n", "pass_at_n", "format_rate", "maj_at_n")),
    }
    assert (summary["not_scored"], summary["complete"], summary["incomplete"]) == (
        WHY,
        False,
        "2 of 2 problems errored, 0 missing",
    )
    lines = step.read_text().splitlines()
    assert lines[:6] == [
        "## pytest-agenteval",
        "",
        "### aime25 · text-only · replay-replay (replay)",
        "",
        "**INCOMPLETE**: 2 of 2 problems errored, 0 missing",
        "",
    ]
    assert lines[8] == (
        f"| replay-replay INCOMPLETE (2 of 2 problems errored, 0 missing) | 2 | 0 | n/a ({WHY}) "
        f"| n/a ({WHY}) | n/a ({WHY}) | n/a ({WHY}) |"
    )


def test_a_partly_errored_run_keeps_its_numbers_and_says_incomplete_first(
    run_suite, pytester: pytest.Pytester
) -> None:
    replay = write_jsonl(pytester.path / "replay.jsonl", replay_rows({0: ["\\boxed{70}"], 2: ["x"]}))
    result, out = run_suite(f"--model-path=replay:{replay}", "--val-n=1", "--limit=3")
    result.stdout.fnmatch_lines(
        [
            "aime25",
            "  INCOMPLETE: 1 of 3 problems errored, 0 missing",
            "  model          replay-replay (replay)",
            "  problems       2 scored, 1 errored, 0 missing (INCOMPLETE)",
        ],
        consecutive=True,
    )
    _, (summary,) = read_results(out)
    assert (summary["average_at_n"], summary["not_scored"], summary["incomplete"]) == (
        0.5,
        None,
        "1 of 3 problems errored, 0 missing",
    )


def test_bfcl_with_nothing_scored_prints_no_accuracy_nor_leaderboard_score() -> None:
    summary = {**summarize_bfcl([]), "not_scored": WHY}
    assert Bfcl().summary_rows(summary) == [
        ("accuracy", f"n/a ({WHY})"),
        ("overall (leaderboard)", f"n/a ({WHY})"),
    ]


def test_gaia_without_an_answer_to_compare_prints_no_exact_match() -> None:
    summary = summarize_gaia([GaiaItemResult("t1", 1, None), GaiaItemResult("t2", 2, None)])
    rows = dict(Gaia().summary_rows(summary))
    assert rows["exact match"] == (
        "n/a (0 of 2 items scored: none has an answer to compare (the test split's are private)) (0/0 scored)"
    )


def test_the_junit_suite_says_why_a_run_is_incomplete(run_suite, pytester: pytest.Pytester) -> None:
    xunit2 = pytest.importorskip("junitparser.xunit2", reason="pip install junitparser")
    replay = write_jsonl(pytester.path / "replay.jsonl", replay_rows({3: ["\\boxed{87}"]}))
    junit: Path = pytester.path / "junit.xml"
    run_suite(f"--model-path=replay:{replay}", "--val-n=1", "--limit=2", f"--junitxml={junit}")
    (suite,) = xunit2.JUnitXml.fromfile(str(junit))
    properties = {p.name: p.value for p in suite.properties()}
    assert {k: v for k, v in properties.items() if k.startswith("agenteval.aime25.")} == {
        "agenteval.aime25.problems": "0",
        "agenteval.aime25.n": "1",
        "agenteval.aime25.average_at_n": "n/a",
        "agenteval.aime25.pass_at_n": "n/a",
        "agenteval.aime25.format_rate": "n/a",
        "agenteval.aime25.maj_at_n": "n/a",
        "agenteval.aime25.complete": "false",
        "agenteval.aime25.incomplete": "2 of 2 problems errored, 0 missing",
        "agenteval.aime25.not_scored": WHY,
    }
