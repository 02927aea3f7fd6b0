"""The xdist controller imports each suite file to summarise it with the suite's own code:
an import that raises there is an error naming the exception, never the generic summary."""

from __future__ import annotations

import pytest

from pytest_agenteval.tasks import registry
from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import TINY_PROBLEMS, forget_the_xdist_worker, read_results, write_jsonl

SUITE = """
import os

from pytest_agenteval.tasks.aime25 import Aime25
{prelude}

class MyMath(Aime25):
    name = "mymath"

    def summarize(self, records, settings):
        return {{**super().summarize(records, settings), "extra": EXTRA}}


agenteval_suite = MyMath()


def test_mymath(evaluation):
    evaluation.check()
"""
# raises where the module is imported outside an xdist worker: the controller, or pytest -n 0
CONTROLLER_RAISES = 'EXTRA = 1\nif "PYTEST_XDIST_WORKER" not in os.environ:\n    1 / 0\n'
ANSWERS = {"What is 30 + 40?": "\\boxed{70}", "What is 12 * 49?": "\\boxed{588}"}


def _run(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    *args: str,
    gate: str = "mymath.average_at_n >= 0.5",
) -> pytest.RunResult:
    forget_the_xdist_worker(monkeypatch)  # when this test runs in an xdist worker itself
    # the run is in this process (xdist's workers are processes of their own anyway): no suite
    # an earlier run collected here may stand in for one the controller cannot import
    monkeypatch.setattr(registry, "_instances", {})
    data = write_jsonl(pytester.path / "tiny.jsonl", TINY_PROBLEMS[:2])
    with OpenAITestServer(ServerConfig(answers=ANSWERS)) as server:
        return pytester.runpytest_inprocess(
            "-p", "no:cacheprovider", f"--dataset-path={data}", f"--endpoint={server.url}",
            "--mode=text-only", "--val-n=1", "--agenteval-out=results.jsonl",
            "--agenteval-gate", gate, *args,
        )  # fmt: skip


def test_a_suite_that_raises_on_the_controller_is_an_error_naming_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = pytester.makepyfile(test_mymath=SUITE.format(prelude=CONTROLLER_RAISES))
    result = _run(pytester, monkeypatch, "-n", "2")
    result.assert_outcomes(passed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert [line for line in result.outlines if line.startswith("ERROR:")] == [
        f"ERROR: {suite}: importing the suite module on the xdist controller, for its summary, raised "
        "ZeroDivisionError: division by zero; it must import there as in the workers; no summary, gate "
        "or results file: the finished items are in results.jsonl.partial and the generation cache "
        "(a rerun requests nothing again)"
    ]
    assert not [line for line in result.outlines if line.startswith("gate ")]
    assert not (pytester.path / "results.jsonl").exists()
    kept = (pytester.path / "results.jsonl.partial").read_text(encoding="utf-8").splitlines()
    assert len(kept) == 2  # the finished items are not lost


def test_without_xdist_the_same_module_is_a_collection_error_naming_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_mymath=SUITE.format(prelude=CONTROLLER_RAISES))
    result = _run(pytester, monkeypatch, "-n", "0")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["ERROR test_mymath.py - ZeroDivisionError: division by zero"])


HELPER_IMPORT = "from helpers import EXTRA\n"  # a module beside the suite file


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_helper_module_beside_the_suite_imports_on_the_controller(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: str
) -> None:
    """The controller imports the suite file as pytest does (its folder on sys.path), so
    the suite's own summary is there with -n as without."""
    folder = pytester.mkdir("suites").joinpath("mine")
    folder.mkdir()
    (folder / "helpers.py").write_text("EXTRA = 7\n", encoding="utf-8")
    (folder / "test_mymath.py").write_text(SUITE.format(prelude=HELPER_IMPORT), encoding="utf-8")
    result = _run(pytester, monkeypatch, "-n", workers, "suites/mine")
    assert result.ret == pytest.ExitCode.OK
    _, (summary,) = read_results(pytester.path / "results.jsonl")
    assert (summary["suite"], summary["extra"], summary["average_at_n"]) == ("mymath", 7, 1.0)


@pytest.mark.parametrize("workers", ["0", "2"])
def test_two_suite_files_of_one_name_under_importlib_mode_keep_their_summaries(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: str
) -> None:
    """--import-mode=importlib lets two folders hold a test_eval.py; the controller loads the
    second under a name of its own, as pytest does (it was 'its module name is already ...')."""
    for folder, suite, extra in (("a", "mya", 1), ("b", "myb", 2)):
        path = pytester.mkdir(folder) / "test_eval.py"
        text = SUITE.format(prelude=f"EXTRA = {extra}\n").replace('"mymath"', f'"{suite}"')
        path.write_text(text, encoding="utf-8")
    result = _run(
        pytester,
        monkeypatch,
        "-n",
        workers,
        "--import-mode=importlib",
        "a",
        "b",
        gate="mya.average_at_n >= 0",
    )
    assert not [line for line in result.outlines if line.startswith("ERROR")], result.outlines[-15:]
    _, summaries = read_results(pytester.path / "results.jsonl")
    assert sorted((s["suite"], s["extra"]) for s in summaries) == [("mya", 1), ("myb", 2)]
