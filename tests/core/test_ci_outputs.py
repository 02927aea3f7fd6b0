"""CI-native outputs: JUnit properties per item and per suite, read back by a real JUnit
consumer (junitparser), and the job summary appended to $GITHUB_STEP_SUMMARY."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import read_results, replay_rows, write_jsonl

TEXTS = {
    0: ["so \\boxed{70}", "maybe \\boxed{71}"],  # 1/2 correct
    1: ["\\boxed{588}", "\\boxed{588}"],  # 2/2
    2: ["\\boxed{21+21}", "no box"],  # 0/2
    3: ["\\boxed{87}"],  # one generation short: an infrastructure error of that item
}
GATE = ("--agenteval-gate", "aime25.average_at_n >= 0.4", "--mode=text-only")  # text-only scoring


@pytest.fixture
def replay(pytester: pytest.Pytester) -> str:
    return f"--model-path=replay:{write_jsonl(pytester.path / 'replay.jsonl', replay_rows(TEXTS))}"


def test_junit_file_of_a_two_worker_run_carries_item_and_suite_properties(
    run_suite, replay: str, pytester: pytest.Pytester
) -> None:
    xunit2 = pytest.importorskip("junitparser.xunit2", reason="pip install junitparser")
    junit = pytester.path / "junit.xml"
    result, out = run_suite(replay, "--val-n=2", "-n", "2", f"--junitxml={junit}", *GATE)
    result.assert_outcomes(passed=2, xfailed=1, errors=1)  # with a gate, the unsolved item is xfailed
    (suite,) = xunit2.JUnitXml.fromfile(str(junit))
    cases = {case.name: {p.name: p.value for p in case.properties()} for case in suite}
    assert cases["test_aime25[0]"] == {
        "agenteval.num_correct": "1",
        "agenteval.n": "2",
        "agenteval.pass_at_n": "true",
        "agenteval.stop_reasons": "recorded=2",
    }
    assert cases["test_aime25[2]"]["agenteval.pass_at_n"] == "false"
    error = cases["test_aime25[3]"]["agenteval.error"]
    replayed = pytester.path / "replay.jsonl"
    assert error == f"sample 1: ReplayError: {replayed}: no recorded generation for problem 3 sample 1"
    properties = {p.name: p.value for p in suite.properties()}
    _, (summary,) = read_results(out)
    assert properties == {
        "agenteval.aime25.problems": "3",
        "agenteval.aime25.n": "2",
        "agenteval.aime25.average_at_n": "0.5",
        "agenteval.aime25.pass_at_n": "0.666667",
        "agenteval.aime25.format_rate": "0.833333",
        "agenteval.aime25.maj_at_n": f"{summary['maj_at_n']:.6g}",
        "agenteval.aime25.complete": "false",
        "agenteval.aime25.incomplete": "1 of 4 problems errored, 0 missing",
        "agenteval.gate.1": "FAIL aime25.average_at_n >= 0.4 "
        "(run incomplete (1 of 4 problems errored, 0 missing): gates fail closed)",
    }
    assert max(len(v) for v in properties.values()) < 150 and "boxed" not in junit.read_text()  # no texts


def test_step_summary_appends_the_table_and_the_gates(
    run_suite, replay: str, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = pytester.path / "step_summary.md"
    target.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    result, out = run_suite(replay, "-k", "not 3", *GATE)
    assert result.ret == 0
    _, (summary,) = read_results(out)
    low, high = summary["ci95"]["average_at_n"]
    assert target.read_text().splitlines() == [
        "earlier step",
        "## pytest-agenteval",
        "",
        "### aime25 · text-only · replay-replay (replay)",  # mode and model tell two runs apart
        "",
        "| Run | N | Problems | Average@2 [95% CI] | Pass@2 [95% CI] | Format | maj@2 |",
        "|---|---|---|---|---|---|---|",
        f"| {summary['base_model']} | 2 | 3 | 50.0% [{100 * low:.1f}%, {100 * high:.1f}%] | 66.7% "
        f"{ci(summary, 'pass_at_n')} | 83.3% {ci(summary, 'format_rate')} | 66.7% |",
        "",
        "### Gates",
        "",
        "| Gate | Verdict | Value | Why |",
        "|---|---|---|---|",
        "| `aime25.average_at_n >= 0.4` | PASS | 0.5000 | 0.5000 >= 0.4 holds |",
        "",
    ]


def ci(summary: dict, name: str) -> str:
    low, high = summary["ci95"][name]
    return f"[{100 * low:.1f}%, {100 * high:.1f}%]"


def test_without_the_variable_or_junitxml_nothing_extra_is_written(
    run_suite, replay: str, pytester, monkeypatch
):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    result, _ = run_suite(replay, "-k", "not 3")
    result.assert_outcomes(passed=2, failed=1)
    assert sorted(p.name for p in Path(pytester.path).iterdir() if p.suffix in (".xml", ".md")) == []
