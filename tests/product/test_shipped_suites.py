"""The benchmarks as an installed product (issue 33): the shipped suites run by name
(`pytest --pyargs pytest_agenteval.suites.<name>`) from a folder that is not the
repository, with -k, -m and -n as in the repository; such a run prints no warning that is
not about the run; a run that writes nothing leaves no empty results folder."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import TINY_PROBLEMS, read_results, replay_rows, write_jsonl

SUITES = ("aime25", "bfcl", "gaia", "datagen")
REPO = Path(__file__).resolve().parents[2]


def _warning_lines(result: pytest.RunResult) -> list[str]:
    lines = [*result.outlines, *result.errlines]
    return [line for line in lines if re.search(r"Warning\b|WARNING|warnings summary", line)]


# AIME25 run by name on the `empty` folder's data, its generations replayed
AIME_BY_NAME = (
    "--pyargs",
    "pytest_agenteval.suites.aime25",
    "--dataset-path=tiny.jsonl",
    "--model-path=replay:replay.jsonl",
)


@pytest.fixture
def empty(pytester: pytest.Pytester) -> pytest.Pytester:
    """A folder with no ini of the repository's (pytester's own tmp folder) and the
    AIME-format data and replayed generations a run needs."""
    write_jsonl(pytester.path / "tiny.jsonl", TINY_PROBLEMS)
    write_jsonl(pytester.path / "replay.jsonl", replay_rows({0: ["\\boxed{70}"] * 2, 1: ["12"] * 2}))
    return pytester


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one-process", "xdist"])
def test_aime25_runs_by_name_from_an_empty_folder_without_a_warning(
    empty: pytest.Pytester, workers: tuple[str, ...]
) -> None:
    # a process of its own: pytest-asyncio's warning is printed by each process's configure,
    # which an in-process run would hand to this test's own warning capture
    result = empty.runpytest_subprocess(
        *AIME_BY_NAME,
        "--mode=text-only",
        "--val-n=2",
        "-k",
        "test_aime25[0] or test_aime25[1]",
        "--agenteval-out=out.jsonl",
        *workers,
    )
    result.assert_outcomes(passed=1, failed=1, deselected=0 if workers else 2)  # xdist: on the workers
    problems, (summary,) = read_results(empty.path / "out.jsonl")
    assert sorted(p["problem_id"] for p in problems) == [0, 1]
    assert summary["suite"] == "aime25"
    assert _warning_lines(result) == []  # pytest-asyncio's loop-scope warning was here, once a process


def test_every_shipped_suite_is_in_the_package_and_the_repository_points_at_it(
    empty: pytest.Pytester,
) -> None:
    import pytest_agenteval.suites as shipped

    package = Path(shipped.__file__).parent
    for name in SUITES:
        module = package / name / f"test_{name}.py"
        assert "agenteval_suite = " in module.read_text(), name
        thin = (REPO / "suites" / name / f"test_{name}.py").read_text()
        assert f"from pytest_agenteval.suites.{name}.test_{name} import agenteval_suite" in thin
    result = empty.runpytest_inprocess(
        "--pyargs",
        *(f"pytest_agenteval.suites.{name}" for name in ("aime25", "bfcl")),
        "--dataset-path=tiny.jsonl",
        "--mode=text-only",
        "--model-path=replay:replay.jsonl",
        "-m",
        "irrelevance or aime25",
        "--co",
        "-q",
    )
    assert result.ret == 0
    assert "test_aime25.py::test_aime25[0]" in result.stdout.str()
    assert "test_bfcl.py::test_bfcl[irrelevance_0]" in result.stdout.str()
    assert "test_bfcl.py::test_bfcl[simple_python_0]" not in result.stdout.str()


@pytest.mark.parametrize(
    "args",
    [("-k", "no-such-problem"), ("--mode=no-such-mode",)],
    ids=["all-deselected", "usage-error"],
)
def test_a_run_that_writes_nothing_leaves_no_results_folder(
    empty: pytest.Pytester, args: tuple[str, ...]
) -> None:
    result = empty.runpytest_inprocess(
        *AIME_BY_NAME,
        "--val-n=2",
        *args,
    )
    assert result.ret in (pytest.ExitCode.NO_TESTS_COLLECTED, pytest.ExitCode.USAGE_ERROR)
    assert not (empty.path / "agenteval-results").exists()


def _aime_by_name(empty: pytest.Pytester, *args: str) -> pytest.RunResult:
    return empty.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        *AIME_BY_NAME,
        "--mode=text-only",
        "--val-n=2",
        "-k",
        "test_aime25[0] or test_aime25[1]",
        *args,
    )


# one xdist worker: the controller checks the selection on the first worker's collection
# (plugin/hooks.py, plugin/batching.py: pytest_xdist_node_collection_finished), which a second
# worker would not change
@pytest.mark.parametrize("workers", [(), ("-n", "1")], ids=["one-process", "xdist"])
def test_start_up_checks_hold_by_name_under_xdist(empty: pytest.Pytester, workers: tuple[str, ...]) -> None:
    """A `--pyargs` node id is relative to the package's folder (`test_aime25.py::...`), not
    to the rootdir: under -n the controller found no suite from it, and every check that
    needs the selected suites was skipped."""
    gate = _aime_by_name(empty, "--agenteval-gate=gaia.accuracy >= 0", *workers)
    assert gate.ret == pytest.ExitCode.USAGE_ERROR
    assert "suite gaia is not selected in this run (selected: aime25)" in gate.stderr.str()
    warned = _aime_by_name(empty, "--gaia-max-steps=3", "--agenteval-out=w.jsonl", *workers)
    assert "WARNING: agenteval: --gaia-max-steps has no effect" in warned.stdout.str() + warned.stderr.str()
    rows = [json.loads(line) for line in (empty.path / "w.jsonl").read_text().splitlines()]
    for row in rows:
        if row["type"] == "summary":
            row["suite_version"] = "0"
    (empty.path / "v0.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    compared = _aime_by_name(empty, "--agenteval-compare=v0.jsonl", *workers)
    assert compared.ret == pytest.ExitCode.USAGE_ERROR
    assert "--agenteval-compare v0.jsonl: not comparable: aime25 version differs" in compared.stderr.str()


def test_batch_refuses_retool_by_name_under_xdist(empty: pytest.Pytester, agenteval_openai_server) -> None:
    """`--batch`'s refusal of multi-turn suites reads the workers' node ids the same way."""
    result = empty.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        "--pyargs",
        "pytest_agenteval.suites.aime25",
        "--dataset-path=tiny.jsonl",
        f"--endpoint={agenteval_openai_server.url}",
        "--model-revision=test",
        "--batch",
        "-n",
        "1",  # the first worker's node ids are read, as above
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    refusal = "--batch sends single-turn requests only, and aime25 in retool mode is multi-turn"
    assert refusal in result.stderr.str()
    assert agenteval_openai_server.stats()["batch"]["files_uploaded"] == 0
