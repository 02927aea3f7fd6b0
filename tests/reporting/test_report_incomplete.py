"""An incomplete run is never ranked (★ best goes to the best complete run) and carries
its marker; a run with nothing scored shows `n/a (<reason>)`, never 0.0% (issue 25 item 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agenteval.report import main
from tests.conftest import SUITE_FILE, TINY_PROBLEMS, write_jsonl

from .conftest import run_plugin

# one generation per problem; a problem left out errors (no recorded generation)
REPLAYS = {
    "complete": {0: "\\boxed{70}", 1: "\\boxed{1}", 2: "\\boxed{1}", 3: "\\boxed{1}"},  # 1 of 4
    "partial": {1: "\\boxed{588}", 2: "\\boxed{16}", 3: "\\boxed{87}"},  # 3 of 3 scored, 0 errored
    "errored": {},  # every problem errored: nothing scored
}
WHY = "0 of 4 problems scored: 4 errored, 0 missing"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("incomplete")
    (folder / "test_tiny.py").write_text(SUITE_FILE)
    write_jsonl(folder / "tiny.jsonl", TINY_PROBLEMS)
    made = {}
    for name, texts in REPLAYS.items():
        rows = [{"problem_id": pid, "sample_index": 0, "text": text} for pid, text in texts.items()]
        rows = rows or [{"problem_id": 0, "sample_index": 1, "text": "\\boxed{70}"}]  # never read at N = 1
        replay = write_jsonl(folder / f"replay-{name}.jsonl", rows)
        made[name] = run_plugin(
            folder,
            f"{name}.jsonl",
            "--dataset-path=tiny.jsonl",
            "--mode=text-only",
            "--val-n=1",
            f"--model-path=replay:{replay}",
        )
    return made


def test_an_incomplete_run_is_never_best_and_says_why(runs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    assert (
        main([str(runs["complete"]), str(runs["partial"]), str(runs["errored"]), "--markdown", str(out)]) == 0
    )
    rows = [line for line in out.read_text().splitlines() if line.startswith("| ")]
    labels = [row.split(" | ")[0] for row in rows[1:4]]
    assert labels == [
        "| complete (reference) ★",
        "| partial INCOMPLETE (1 of 4 problems errored, 0 missing)",
        "| errored INCOMPLETE (4 of 4 problems errored, 0 missing)",
    ]
    errored = rows[3].split(" | ")
    assert errored[3:7] == [f"n/a ({WHY})"] * 4  # Average@1, Pass@1, format, maj@1: no 0.0%
