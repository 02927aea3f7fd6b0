"""Real runs for the shard and merge tests: pytest on small suites with recorded
generations (`replay:`), and `pytest-agenteval merge` as a user runs it. Both run in this
process by default (as `pytester.runpytest_inprocess` does: the folder as the working
directory, the run's environment, sys.modules and sys.path restored after, its stdout and
stderr captured), which saves an interpreter start and the plugin's imports per run;
`subprocess=True` runs one as its own process. Under `-n 2` the workers are processes
anyway; the controller runs here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SUITE_FILE, as_a_process, write_jsonl

REPO = Path(__file__).resolve().parents[2]
# Ten problems of our own: problem p's answer is 2p.
PROBLEMS = [{"id": p, "problem": f"What is {p} + {p}?", "answer": str(2 * p)} for p in range(10)]
AIME = ("--dataset-path=tiny.jsonl", "--mode=text-only", "--model-path=replay:replay.jsonl")


@dataclass(frozen=True)
class Done:
    ret: int
    out: str
    err: str


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_STEP_SUMMARY" and not k.startswith("SLURM_")}
    env.pop("JOB_COMPLETION_INDEX", None)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    return {**env, **(extra or {})}


def _run_python(folder: Path, args: Sequence[str], env: Mapping[str, str] | None) -> Done:
    done = subprocess.run(
        [sys.executable, *args], cwd=folder, env=_env(env), capture_output=True, text=True, timeout=600
    )
    return Done(done.returncode, done.stdout, done.stderr)


def run_pytest(
    folder: Path, *args: str, env: Mapping[str, str] | None = None, subprocess: bool = False
) -> Done:
    options = ["-p", "no:cacheprovider", "-p", "no:randomly", *args]
    if subprocess:
        return _run_python(folder, ["-m", "pytest", *options], env)
    with as_a_process(folder, _env(env)) as (out, err):
        ret = pytest.main(options)
    return Done(int(ret), out.getvalue(), err.getvalue())


def merge_run(
    folder: Path, *args: str, env: Mapping[str, str] | None = None, subprocess: bool = False
) -> Done:
    if subprocess:
        return _run_python(folder, ["-m", "pytest_agenteval", "merge", *args], env)
    from pytest_agenteval.cli import main

    with as_a_process(folder, _env(env)) as (out, err):
        try:
            ret = main(["merge", *args])
        except SystemExit as exc:  # as `python -m pytest_agenteval` would exit
            ret = exc.code if isinstance(exc.code, int) else 1
    return Done(ret, out.getvalue(), err.getvalue())


def aime_replay(
    correct: Mapping[int, int], samples: int = 2, skip: Sequence[int] = ()
) -> list[dict[str, Any]]:
    """Problem p gets `correct[p]` right answers of `samples` (default: the first one
    right where p is even); the problems in `skip` get no recorded generation (an error)."""
    rows = []
    for p in range(len(PROBLEMS)):
        if p in skip:
            continue
        right = correct.get(p, 1 if p % 2 == 0 else 0)
        for j in range(samples):
            text = f"so \\boxed{{{2 * p}}}" if j < right else "\\boxed{1}"
            rows.append({"problem_id": p, "sample_index": j, "text": text})
    return rows


def aime_folder(folder: Path, replay: list[dict[str, Any]] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test_tiny.py").write_text(SUITE_FILE)
    write_jsonl(folder / "tiny.jsonl", PROBLEMS)
    write_jsonl(folder / "replay.jsonl", replay if replay is not None else aime_replay({}))
    return folder


def lines(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [r for r in rows if r["type"] == "problem"], [r for r in rows if r["type"] == "summary"]
