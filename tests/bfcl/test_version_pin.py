"""bfcl-eval is pinned at the version our checkers were verified against; another installed
version is one start-up line, an evaluation of BFCL only."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agenteval.tasks.bfcl_pin import VERIFIED_BFCL_EVAL, bfcl_eval_version, version_warning

BFCL_SUITE = """
from pytest_agenteval.tasks.bfcl.suite import Bfcl

agenteval_suite = Bfcl()


def test_bfcl(evaluation):
    evaluation.check()
"""
AIME_SUITE = """
from pytest_agenteval.tasks.aime25 import Aime25

agenteval_suite = Aime25()


def test_aime25(evaluation):
    evaluation.check()
"""
HEADER = (
    "WARNING: bfcl-eval 2099.1.1 is installed: BFCL verdicts were verified against bfcl-eval 2026.3.23 only"
)


@pytest.mark.parametrize(
    ("installed", "line"),
    [
        (None, None),
        ("2026.3.23", None),
        (
            "2026.4.1",
            "bfcl-eval 2026.4.1 is installed: BFCL verdicts were verified against bfcl-eval 2026.3.23 "
            "only (pip install --no-deps bfcl-eval==2026.3.23)",
        ),
    ],
)
def test_only_another_version_is_warned_about(installed: str | None, line: str | None) -> None:
    assert version_warning(installed) == line


def test_the_pinned_version_is_the_one_installed_for_the_tests() -> None:
    assert VERIFIED_BFCL_EVAL == "2026.3.23"
    assert bfcl_eval_version() == VERIFIED_BFCL_EVAL  # README's set-up command pins it


def _another_version_first_on_the_path(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dist-info of another bfcl-eval ahead of the real one: what `importlib.metadata` reads."""
    info = pytester.path / "shadow" / "bfcl_eval-2099.1.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bfcl-eval\nVersion: 2099.1.1\n")
    monkeypatch.setenv("PYTHONPATH", str(pytester.path / "shadow"))


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["n0", "n2"])
def test_another_version_is_one_start_up_line_on_a_bfcl_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: list[str], small_bfcl_dir: Path
) -> None:
    pytester.makepyfile(test_bfcl=BFCL_SUITE)
    _another_version_first_on_the_path(pytester, monkeypatch)
    # the line is about the installed package, not its data: each process collects a small
    # copy of the data instead of parsing and collecting all 10,306 entries
    result = pytester.runpytest_subprocess(
        "--co",
        "-q",
        "-m",
        "simple_python",
        "--model-path=replay:none",
        f"--bfcl-data-dir={small_bfcl_dir}",
        *workers,
    )
    result.stdout.fnmatch_lines(["*5/* tests collected*"])
    lines = [line for line in result.stdout.lines if "verified against" in line]
    assert [line.split(" (pip")[0] for line in lines] == [HEADER]


def test_no_line_on_a_run_without_bfcl(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_aime25=AIME_SUITE)
    pytester.path.joinpath("aime.jsonl").write_text('{"id": "1", "problem": "1+1?", "answer": "2"}\n')
    _another_version_first_on_the_path(pytester, monkeypatch)
    result = pytester.runpytest_subprocess(
        "--co", "-q", "--model-path=replay:none", "--dataset-path=aime.jsonl"
    )
    assert result.ret == 0
    assert "test_aime25.py::test_aime25[1]" in result.stdout.lines
    assert not [line for line in result.stdout.lines if "verified against" in line]
