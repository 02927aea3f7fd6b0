"""The `pytest-agenteval` command: subcommand dispatch and one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pytest_agenteval.cli import SUBCOMMANDS, main


def test_review_is_a_subcommand() -> None:
    assert "review" in SUBCOMMANDS


def test_no_subcommand_prints_usage(capsys) -> None:
    assert main([]) == 2
    assert "usage: pytest-agenteval {review}" in capsys.readouterr().err


def test_a_missing_data_file_is_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest_agenteval", "review", str(tmp_path / "nope.jsonl"), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"pytest-agenteval review: {tmp_path / 'nope.jsonl'}: cannot read (No such file or "
        "directory); give a JSONL of generated problems"
    ]
