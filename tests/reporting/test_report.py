"""`pytest-agenteval report` on real results files: one row per run with the exact
numbers, deltas and verdicts against the baseline, changed problems, refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_agenteval.report import main
from pytest_agenteval.report.runs import default_label

from .conftest import REPO

# 4 problems: the report says so, as --agenteval-compare does, instead of a verdict
FOUR = "too few problems to decide (4 paired; need >= 10) |"


def report(*args: object) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it: `python -m pytest_agenteval report ...`."""
    return subprocess.run(
        [sys.executable, "-m", "pytest_agenteval", "report", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )


def summary(path: Path) -> dict:
    return [json.loads(x) for x in path.read_text().splitlines() if '"summary"' in x][-1]


def ci(path: Path, name: str) -> str:
    low, high = summary(path)["ci95"][name]
    return f"[{100 * low:.1f}%, {100 * high:.1f}%]"


def test_one_row_per_run_with_exact_numbers_and_deltas(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    done = report(runs["step20"], runs["step50"], "--baseline", runs["base"], "--markdown", out)
    assert done.returncode == 0, done.stderr
    lines = out.read_text().splitlines()
    base, step20, step50 = runs["base"], runs["step20"], runs["step50"]
    assert lines[lines.index("## aime25") + 2 :][:5] == [
        "| Run | N | Problems | Average@2 [95% CI] | Pass@2 [95% CI] | Format | maj@2 "
        "| Δ vs Base (95% CI) | paired bootstrap |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| Base (reference) | 2 | 4 | 12.5% {ci(base, 'average_at_n')} | 25.0% {ci(base, 'pass_at_n')} "
        f"| 75.0% {ci(base, 'format_rate')} | 25.0% |  |  |",
        f"| Step 20 | 2 | 4 | 37.5% {ci(step20, 'average_at_n')} | 75.0% {ci(step20, 'pass_at_n')} "
        f"| 75.0% {ci(step20, 'format_rate')} | 75.0% | +25.0 pp [+0.0, +50.0] | " + FOUR,
        f"| Step 50 ★ | 2 | 4 | 75.0% {ci(step50, 'average_at_n')} | 100.0% {ci(step50, 'pass_at_n')} "
        f"| 87.5% {ci(step50, 'format_rate')} | 100.0% | +62.5 pp [+25.0, +100.0] | " + FOUR,
    ]
    text = out.read_text()
    assert "| Step 20 | 37.5% | 75.0% |" in text  # pass@k: k=1 is Average@N, k=2 Pass@N
    assert "- solved now, not in Base (2): `0`, `1`" in text
    assert "- solved now, not in Base (3): `0`, `1`, `2`" in text


def test_a_drop_against_the_baseline_lists_the_problems_lost(runs: dict[str, Path], capsys) -> None:
    assert main([str(runs["base"]), "--baseline", str(runs["step50"]), "--label", "regressed"]) == 0
    text = capsys.readouterr().out
    assert "| regressed | 2 | 4 | 12.5%" in text
    assert "| -62.5 pp [-100.0, -25.0] | " + FOUR in text
    assert "### Changed problems: regressed vs Step 50" in text
    assert "- solved in Step 50, not now (3): `0`, `1`, `2`" in text


def test_without_a_baseline_the_first_run_is_the_reference(runs: dict[str, Path], capsys) -> None:
    assert main([str(runs["base"]), str(runs["step20"])]) == 0
    text = capsys.readouterr().out
    assert "| Base (reference) | 2 | 4 | 12.5%" in text
    assert "| Step 20 ★ | 2 | 4 | 37.5%" in text


@pytest.mark.parametrize(
    ("other", "reason"),
    [
        (
            "limit2",
            "aime25 selection differs: limit2.jsonl has limit=2, items=2, aime25-base.jsonl has items=4",
        ),
        ("n1", "aime25 N differs: n1.jsonl has N=1, aime25-base.jsonl has N=2"),
    ],
)
def test_runs_that_measure_different_things_are_refused(
    runs: dict[str, Path], other: str, reason: str
) -> None:
    done = report(runs["base"], runs[other])
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"pytest-agenteval report: runs are not comparable: {reason}; "
        "pass --allow-mixed to compare them anyway\n"
    )


def test_allow_mixed_compares_anyway_and_says_so(runs: dict[str, Path], capsys) -> None:
    assert main([str(runs["base"]), str(runs["n1"]), "--allow-mixed"]) == 0
    text = capsys.readouterr().out
    assert "> **Mixed runs** (--allow-mixed): aime25 N differs: n1.jsonl has N=1" in text
    assert "| n1 ★ | 1 | 4 | 75.0%" in text  # the first sample of step 20: 3 of 4 correct


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file; give results JSONL files written by a pytest-agenteval run"),
        ("not json\n", ":1: not valid JSON; is it a results file?"),
        ('{"type": "problem", "suite": "aime25", "problem_id": 0}\n', "no summary line (not a results file)"),
    ],
)
def test_unusable_files_are_one_line(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "x.jsonl"
    if content is not None:
        path.write_text(content)
    done = report(path)
    assert done.returncode == 2
    assert done.stderr.startswith(f"pytest-agenteval report: {path}") and message in done.stderr
    assert done.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("aime25-retool-step20.jsonl", "Step 20"),
        ("aime25-retool-base.jsonl", "Base"),
        ("aime25-sampler-steps_150.jsonl", "aime25-sampler-steps_150"),
        ("run_step-200.jsonl", "Step 200"),
        ("mine.jsonl", "mine"),
    ],
)
def test_labels_come_from_the_lab_file_names(name: str, label: str) -> None:
    assert default_label(Path(name)) == label


def test_png_charts_are_written_per_suite(runs: dict[str, Path], tmp_path: Path) -> None:
    assert main([str(runs["base"]), str(runs["step20"]), "--png", str(tmp_path / "png")]) == 0
    written = sorted(p.name for p in (tmp_path / "png").iterdir())
    assert written == ["aime25-checkpoints.png", "aime25-pass-at-k.png", "aime25-stop-reasons.png"]
    assert all((tmp_path / "png" / n).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for n in written)
