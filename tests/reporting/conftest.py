"""Real results files for the report tests: the tiny AIME suite run by the plugin on
recorded generations (`replay:`), as checkpoints of a training run would be."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.conftest import SUITE_FILE, TINY_PROBLEMS, as_a_process, write_jsonl

REPO = Path(__file__).resolve().parents[2]
ANSWERS = {0: "70", 1: "588", 2: "16", 3: "87"}
# correct generations (of 2) per problem 0..3
TEXT_ONLY = ("--dataset-path=tiny.jsonl", "--mode=text-only")  # the numbers below are text-only scoring
CHECKPOINTS = {"base": (0, 0, 0, 1), "step20": (1, 1, 0, 1), "step50": (2, 2, 1, 1)}


def replay_texts(correct: Sequence[int]) -> list[dict]:
    """Problem p gets `correct[p]` right answers, then a wrong (boxed) one; problem 2's
    wrong answers are unboxed, so the format rate differs from 100%."""
    rows = []
    for pid, right in enumerate(correct):
        for j in range(2):
            wrong = "no box" if pid == 2 else "\\boxed{1}"
            text = f"so \\boxed{{{ANSWERS[pid]}}}" if j < right else wrong
            rows.append({"problem_id": pid, "sample_index": j, "text": text})
    return rows


def run_plugin(folder: Path, out: str, *args: str) -> Path:
    """The plugin on `folder`'s suite, in this process (`as_a_process`), its output kept
    out of the test's."""
    with as_a_process(folder):
        pytest.main(["-q", "-p", "no:cacheprovider", f"--agenteval-out={out}", *args])
    path = folder / out
    assert path.is_file(), f"the plugin wrote no {out}"
    return path


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """aime25-base/-step20/-step50.jsonl, plus runs that differ in selection and in N."""
    folder = tmp_path_factory.mktemp("runs")
    (folder / "test_tiny.py").write_text(SUITE_FILE)
    write_jsonl(folder / "tiny.jsonl", TINY_PROBLEMS)
    made = {}
    for name, correct in CHECKPOINTS.items():
        replay = write_jsonl(folder / f"replay-{name}.jsonl", replay_texts(correct))
        made[name] = run_plugin(folder, f"aime25-{name}.jsonl", *TEXT_ONLY, f"--model-path=replay:{replay}")
    replay = f"--model-path=replay:{folder / 'replay-step20.jsonl'}"
    made["limit2"] = run_plugin(folder, "limit2.jsonl", *TEXT_ONLY, replay, "--limit=2")
    made["n1"] = run_plugin(folder, "n1.jsonl", *TEXT_ONLY, replay, "--val-n=1")
    return made
