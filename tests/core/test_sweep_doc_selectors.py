"""docs/sweeps.md's `-m` and `-k` lines each select one model's items: a bare `-k step-200`
is a substring and also selects `step-2000` (a glob over `ckpts/step-*` has both)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = "docs/examples/sweep"


def _doc_selectors() -> list[list[str]]:
    lines = (REPO / "docs" / "sweeps.md").read_text(encoding="utf-8").splitlines()
    found = []
    for line in lines:
        match = re.match(
            r"pytest suites/aime25 --model-path base --model-path 'ckpts/step-\*' (-[mk]) (\S+)", line
        )
        if match:
            found.append([match.group(1), match.group(2).strip("'\"")])
    return found


def test_the_doc_lists_a_marker_and_a_keyword_selector() -> None:
    assert [flag for flag, _ in _doc_selectors()] == ["-m", "-k"]


@pytest.mark.parametrize("selector", _doc_selectors(), ids=lambda s: " ".join(s))
def test_each_doc_selector_picks_step_200_and_not_step_2000(selector: list[str]) -> None:
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites/aime25", "--collect-only", "-q",
            f"--dataset-path={EXAMPLES}/problems.jsonl", "--mode=text-only", "--val-n=2",
            f"--model-path=base=replay:{EXAMPLES}/base.jsonl",
            f"--model-path=step-200=replay:{EXAMPLES}/step-100.jsonl",
            f"--model-path=step-2000=replay:{EXAMPLES}/step-200.jsonl",
            *selector,
        ],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(ids) == 12 and all("[step-200:" in i for i in ids), done.stdout
