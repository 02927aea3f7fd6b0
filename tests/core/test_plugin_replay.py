"""The plugin end to end on recorded generations (`replay:`): items, outcomes, the
results file, the gate and the exit status, with and without xdist."""

from __future__ import annotations

import json
from pathlib import Path

import datasets  # imported here, not in a test: pytester unloads what a test imports
import pytest

from tests.conftest import TINY_PROBLEMS, read_results, replay_rows, write_jsonl

TEXTS = {
    0: ["so \\boxed{70}", "maybe \\boxed{71}"],  # 1/2 correct
    1: ["\\boxed{$\\mathrm{588}$}", "\\boxed{588}"],  # 2/2
    2: ["\\boxed{21+21}", "no box"],  # 0/2, one formatted
    3: ["\\boxed{42.0}", "\\boxed{87} and then \\boxed{86"],  # 1/2 (unclosed last box falls back)
}


@pytest.fixture
def replay(pytester: pytest.Pytester) -> Path:
    return write_jsonl(pytester.path / "replay.jsonl", replay_rows(TEXTS))


def test_replay_scores_every_generation_and_writes_the_results_file(run_suite, replay: Path) -> None:
    result, out = run_suite(f"--model-path=replay:{replay}")
    result.assert_outcomes(passed=3, failed=1)
    problems, summaries = read_results(out)
    assert [p["problem_id"] for p in problems] == [0, 1, 2, 3]
    assert [p["num_correct"] for p in problems] == [1, 2, 0, 1]
    assert [g["predicted_answer"] for g in problems[3]["generations"]] == [None, "87"]
    assert problems[2]["generations"][0]["formatted"] is True
    (summary,) = summaries
    assert (summary["average_at_n"], summary["pass_at_n"], summary["format_rate"]) == (4 / 8, 3 / 4, 7 / 8)
    assert (summary["problems"], summary["generations"], summary["complete"]) == (4, 8, True)
    assert summary["model"]["backend"] == "replay"
    assert summary["config"]["model_path"] == f"replay:{replay}"
    assert not out.with_name(out.name + ".partial").exists()


def test_results_are_identical_with_two_workers(run_suite, replay: Path) -> None:
    _, serial = run_suite(f"--model-path=replay:{replay}", out="serial.jsonl")
    result, parallel = run_suite(f"--model-path=replay:{replay}", "-n", "2", out="parallel.jsonl")
    result.assert_outcomes(passed=3, failed=1)
    strip = {"latency_s", "started_at", "finished_at", "duration_s", "workers", "config", "harness"}
    left, right = (
        [
            {k: v for k, v in line.items() if k not in strip}
            for problems, summaries in [read_results(p)]
            for line in problems + summaries
        ]
        for p in (serial, parallel)
    )
    assert left == right


def test_failures_alone_pass_a_gate(run_suite, replay: Path) -> None:
    result, _ = run_suite(f"--model-path=replay:{replay}", "--agenteval-gate", "aime25.average_at_n >= 0.5")
    result.assert_outcomes(passed=3, xfailed=1)  # with a gate, an unsolved item is xfailed (docs/ci.md)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        ["gate PASS  aime25.average_at_n >= 0.5  (0.5000 >= 0.5 holds, a point comparison)"]
    )


def test_a_gate_below_threshold_fails_the_run(run_suite, replay: Path) -> None:
    result, out = run_suite(
        f"--model-path=replay:{replay}",
        "--agenteval-gate",
        "aime25.pass_at_n >= 0.5",
        "--agenteval-gate",
        "aime25.average_at_n > 0.5",
    )
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        ["gate FAIL  aime25.average_at_n > 0.5  (0.5000 > 0.5 does not hold, a point comparison)"]
    )
    _, (summary,) = read_results(out)
    assert [g["passed"] for g in summary["gates"]] == [True, False]


def test_without_a_gate_plain_pytest_exit_status(run_suite, replay: Path) -> None:
    result, _ = run_suite(f"--model-path=replay:{replay}", "-k", "test_aime25[1]")
    assert (result.ret, result.parseoutcomes()) == (0, {"passed": 1, "deselected": 3})


def test_missing_generations_are_errors_and_gates_fail_closed(run_suite, pytester: pytest.Pytester) -> None:
    short = write_jsonl(pytester.path / "short.jsonl", replay_rows({**TEXTS, 2: ["\\boxed{16}"]}))
    result, out = run_suite(
        f"--model-path=replay:{short}", "--val-n", "2", "--agenteval-gate", "aime25.average_at_n >= 0.0"
    )
    result.assert_outcomes(passed=3, errors=1)
    assert result.ret == 1
    problems, (summary,) = read_results(out)
    assert problems[2]["complete"] is False and len(problems[2]["generations"]) == 1
    assert "no recorded generation for problem 2 sample 1" in problems[2]["error"]
    assert (summary["complete"], summary["errors"]["problem_ids"], summary["problems"]) == (False, [2], 3)
    result.stdout.fnmatch_lines(
        [
            "  INCOMPLETE: 1 of 4 problems errored, 0 missing",
            "gate FAIL  aime25.average_at_n >= 0.0  (run incomplete (1 of 4 problems errored, 0 missing): "
            "gates fail closed)",
        ]
    )


def test_own_results_file_replays_to_the_same_verdicts(run_suite, replay: Path) -> None:
    _, first = run_suite(f"--model-path=replay:{replay}", out="first.jsonl")
    result, second = run_suite(f"--model-path=replay:{first}", out="second.jsonl")
    result.assert_outcomes(passed=3, failed=1)
    verdicts = [
        [
            (g["sample_index"], g["correct"], g["formatted"], g["predicted_answer"])
            for p in read_results(path)[0]
            for g in p["generations"]
        ]
        for path in (first, second)
    ]
    assert verdicts[0] == verdicts[1]


def test_limit_takes_the_first_problems_in_dataset_order(run_suite, replay: Path) -> None:
    result, out = run_suite(f"--model-path=replay:{replay}", "--limit", "2")
    result.assert_outcomes(passed=2)
    problems, (summary,) = read_results(out)
    assert [p["problem_id"] for p in problems] == [0, 1]
    assert summary["selection"]["limit"] == 2


def test_markers_and_collect_only(aime_suite: pytest.Pytester, tiny_aime: Path, replay: Path) -> None:
    result = aime_suite.runpytest_inprocess(
        "--co",
        "-q",
        "-m",
        "aime25",
        "--strict-markers",
        f"--dataset-path={tiny_aime}",
        f"--model-path=replay:{replay}",
    )
    result.stdout.fnmatch_lines(["test_tiny.py::test_aime25[[]0[]]", "*4 tests collected*"])
    assert not list(aime_suite.path.glob("agenteval-results/*.jsonl"))


def test_ini_file_sets_options(aime_suite: pytest.Pytester, tiny_aime: Path, replay: Path) -> None:
    aime_suite.makeini(f"[pytest]\nlimit = 1\nmodel_path = replay:{replay}\n")
    result = aime_suite.runpytest_inprocess(f"--dataset-path={tiny_aime}", "--agenteval-out=r.jsonl")
    result.assert_outcomes(passed=1)
    _, (summary,) = read_results(aime_suite.path / "r.jsonl")
    assert summary["config"]["limit"] == 1


def test_default_results_name_carries_suite_model_and_time(
    aime_suite: pytest.Pytester, tiny_aime: Path, replay: Path
) -> None:
    aime_suite.runpytest_inprocess(f"--dataset-path={tiny_aime}", f"--model-path=replay:{replay}")
    (path,) = aime_suite.path.glob("agenteval-results/*.jsonl")
    assert path.name.startswith("aime25-replay-replay-2")
    lines = path.read_text().splitlines()
    assert json.loads(lines[-1])["type"] == "summary" and len(lines) == 5


@pytest.mark.parametrize("form", ["parquet", "save_to_disk", "dataset_dict"])
def test_data_from_parquet_and_save_to_disk(
    run_suite, replay: Path, pytester: pytest.Pytester, form: str
) -> None:
    table = datasets.Dataset.from_list(TINY_PROBLEMS)
    if form == "parquet":
        data = pytester.path / "tiny.parquet"
        table.to_parquet(str(data))
    elif form == "save_to_disk":
        data = pytester.path / "tiny_dataset"
        table.save_to_disk(str(data))
    else:
        data = pytester.path / "tiny_dict"
        datasets.DatasetDict({"train": table}).save_to_disk(str(data))
    result, out = run_suite(f"--model-path=replay:{replay}", data=data)
    result.assert_outcomes(passed=3, failed=1)
    problems, (summary,) = read_results(out)
    assert [p["ground_truth"] for p in problems] == ["70", "588", "16", "87"]
    assert summary["dataset_path"] == str(data.resolve())


CUSTOM_SUITE = """
from pytest_agenteval.tasks.aime25 import Aime25


class Custom(Aime25):
    name = "custom"

    def sampling(self, settings):
        return {**super().sampling(settings), "temperature": 0.0}

    def summarize(self, records, settings):
        return {**super().summarize(records, settings), "custom_metric": 0.5}


agenteval_suite = Custom()


def test_custom(evaluation):
    evaluation.check()
"""


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_user_suite_is_summarised_by_its_own_code_under_xdist(
    pytester: pytest.Pytester, tiny_aime: Path, replay: Path, workers: str
) -> None:
    pytester.makepyfile(test_custom=CUSTOM_SUITE)
    result = pytester.runpytest_inprocess(
        f"--dataset-path={tiny_aime}", f"--model-path=replay:{replay}", "-n", workers,
        "--agenteval-out=r.jsonl", "--agenteval-gate", "custom.custom_metric >= 0.5",
    )  # fmt: skip
    assert result.ret == 0
    _, (summary,) = read_results(pytester.path / "r.jsonl")
    assert (summary["custom_metric"], summary["temperature"]) == (0.5, 0.0)
