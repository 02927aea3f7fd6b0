"""The 3-checkpoint sweep the tracker tests log: the recorded runs of docs/examples/sweep/
re-scored (`replay:`), labelled step-100, step-200 and step-300, with a gate, so the run
exits 0 and its gate verdicts are logged too."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples" / "sweep"
SUITE_FILE = """
from pytest_agenteval.tasks.aime25 import Aime25

agenteval_suite = Aime25()


def test_aime25(evaluation):
    evaluation.check()
"""
RECORDED = {"step-100": "base", "step-200": "step-100", "step-300": "step-200"}
GATE = "aime25.average_at_n >= 0.2"
STEPS = {"step-100": 100, "step-200": 200, "step-300": 300}


def prepare(folder: Path) -> Path:
    """The suite file and the recorded runs in `folder`."""
    (folder / "test_sweep.py").write_text(SUITE_FILE, encoding="utf-8")
    shutil.copytree(EXAMPLES, folder / "sweep", dirs_exist_ok=True)
    return folder


def sweep_args(*extra: str, out: str = "out/aime25.jsonl") -> list[str]:
    return [
        "-p",
        "no:cacheprovider",
        "--dataset-path=sweep/problems.jsonl",
        "--mode=text-only",
        "--val-n=2",
        f"--agenteval-out={out}",
        f"--agenteval-gate={GATE}",
        *(f"--model-path={label}=replay:sweep/{name}.jsonl" for label, name in RECORDED.items()),
        *extra,
    ]


def run_sweep(folder: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The sweep in a pytest process of its own, in `folder` (prepared)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "test_sweep.py", *sweep_args(*extra)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def summaries(out: Path) -> dict[str, dict[str, Any]]:
    """label -> the summary line of its results file."""
    found = {}
    for label in RECORDED:
        lines = [
            json.loads(x) for x in (out / f"aime25-{label}.jsonl").read_text(encoding="utf-8").splitlines()
        ]
        (found[label],) = [x for x in lines if x["type"] == "summary"]
    return found


def markers(path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    return [x for x in lines if x["type"] == "tracker"]
