"""Real results files of a sweep's models, made by real one-model runs of the plugin (in this
process) on a 12-problem AIME-style suite (text-only, N=2): `base` and `step-100` (under `-n 2`)
are the package's test server behind real sockets, answering some problems right and the rest
wrong; `step-200` is the `replay:` model over recorded lines. 12 problems: enough to pair (>= 10)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import SUITE_FILE, as_a_process, write_jsonl

REPO = Path(__file__).resolve().parents[2]
PROBLEMS = [
    {"id": p, "problem": f"Problem {p}: what is {p} + 100?", "answer": str(p + 100)} for p in range(12)
]
LABELS = ("base", "step-100", "step-200")
SOLVED = {"base": {0, 1, 2}, "step-100": {0, 1, 2, 3}, "step-200": set(range(11))}  # problem ids right
COMMON = ("--mode=text-only", "--val-n=2", "--dataset-path=problems.jsonl", "--agenteval-no-cache")


def _run(folder: Path, out: str, *args: str) -> Path:
    """The plugin on `folder`'s suite in this process (`as_a_process`: no interpreter to start
    and import), its output kept out of the test's; with -n 2 its workers are processes."""
    path = [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    with as_a_process(folder, env) as (stdout, stderr):
        pytest.main(["-q", "-p", "no:cacheprovider", f"--agenteval-out={out}", *COMMON, *args])
    path = folder / out
    assert path.is_file(), (
        f"the plugin wrote no {out}: {stdout.getvalue()[-2000:]}{stderr.getvalue()[-2000:]}"
    )
    return path


def _server_config(label: str) -> ServerConfig:
    right = {PROBLEMS[p]["problem"]: f"so \\boxed{{{PROBLEMS[p]['answer']}}}" for p in SOLVED[label]}
    return ServerConfig(model=f"{label}-model", answers=right, answer="I think \\boxed{0}")


@pytest.fixture(scope="session")
def sweep_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Label -> its results file, in model order. Made once a run: under xdist the workers
    share them (xdist's own recipe: the workers' common temporary folder and a lock), as
    tests/sweep_gates' two modules using them usually run on different workers; the files
    are only read."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return _make_sweep_files(tmp_path_factory.mktemp("sweep"))
    shared = tmp_path_factory.getbasetemp().parent  # the run's, above each worker's own
    folder = shared / "sweep-gates-files"
    with open(shared / "sweep-gates-files.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other worker waits for the files, then reads them
        if not (folder / "made").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            _make_sweep_files(folder)
            (folder / "made").touch()
    return {label: folder / f"aime25-{label}.jsonl" for label in LABELS}


def _make_sweep_files(folder: Path) -> dict[str, Path]:
    (folder / "test_sweep.py").write_text(SUITE_FILE)
    write_jsonl(folder / "problems.jsonl", PROBLEMS)
    made = {}
    for label, workers in (("base", ()), ("step-100", ("-n", "2"))):  # with and without xdist
        with OpenAITestServer(_server_config(label)) as server:
            made[label] = _run(folder, f"aime25-{label}.jsonl", f"--endpoint={server.url}", *workers)
    lines = [
        {
            "problem_id": p["id"],
            "sample_index": j,
            "text": f"\\boxed{{{p['answer'] if p['id'] in SOLVED['step-200'] else 1}}}",
        }
        for p in PROBLEMS
        for j in range(2)
    ]
    replay = write_jsonl(folder / "replay-step-200.jsonl", lines)
    made["step-200"] = _run(folder, "aime25-step-200.jsonl", f"--model-path=replay:{replay}")
    return made


def read_results(path: Path) -> tuple[dict[str, Any], dict[str, list[bool]]]:
    """A results file as the controller holds it: the suite's summary and, per problem id,
    each generation's correctness."""
    summary: dict[str, Any] = {}
    correct: dict[str, list[bool]] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row["type"] == "summary":
            summary = row
        elif row["type"] == "problem":
            correct[str(row["problem_id"])] = [bool(g["correct"]) for g in row["generations"]]
    return summary, correct


@pytest.fixture(scope="session")
def sweep_data(
    sweep_files: Mapping[str, Path],
) -> tuple[dict[tuple[str, str], Any], dict[tuple[str, str], dict[str, list[bool]]]]:
    summaries, scores = {}, {}
    for label, path in sweep_files.items():
        summaries[("aime25", label)], scores[("aime25", label)] = read_results(path)
    return summaries, scores
