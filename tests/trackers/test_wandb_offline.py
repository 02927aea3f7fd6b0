"""--agenteval-log wandb:PROJECT with WANDB_MODE=offline: the sweep writes an offline run
whose history, read back from the run's `.wandb` file (tests/trackers/wandb_file.py, with
wandb's own record classes), has each checkpoint's metrics at its step."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._oracle import require_oracle
from tests.trackers.sweep_runs import STEPS, markers, prepare, summaries, sweep_args
from tests.trackers.wandb_file import config, history


@pytest.fixture(scope="module", autouse=True)
def _wandb_installed() -> None:
    try:
        import wandb  # noqa: F401
    except ImportError:
        require_oracle("needs wandb: pip install -e '.[wandb]' (README command 2)")


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    folder = tmp_path / "wandb-home"
    for name, value in {
        "WANDB_MODE": "offline",
        "WANDB_DIR": str(folder),
        "WANDB_CONFIG_DIR": str(folder / "config"),
        "WANDB_CACHE_DIR": str(folder / "cache"),
        "WANDB_DATA_DIR": str(folder / "data"),
    }.items():
        monkeypatch.setenv(name, value)
    folder.mkdir()
    return folder


def _run_file(folder: Path) -> Path:
    (path,) = folder.glob("wandb/offline-run-*/run-*.wandb")
    return path


def test_an_offline_run_holds_each_checkpoint_at_its_step(pytester: pytest.Pytester, offline: Path) -> None:
    prepare(pytester.path)
    result = pytester.runpytest_inprocess(*sweep_args("--agenteval-log=wandb:agenteval-test"))
    assert result.ret == 0
    (line,) = [x for x in result.outlines if x.startswith("agenteval: logged to wandb:agenteval-test")]
    assert line.endswith("(step-100 at step 100, step-200 at step 200, step-300 at step 300)")
    said = [x for x in result.outlines + result.errlines if "wandb" in x.lower() and x != line]
    assert said == []  # W&B's own lines (`wandb: WARNING Symlinked 1 file...`) are not shown
    rows = history(_run_file(offline))
    by_label = summaries(pytester.path / "out")
    assert [(r["_step"], r["agenteval/step"]) for r in rows] == [(100, 100), (200, 200), (300, 300)]
    for row, (label, summary) in zip(rows, by_label.items(), strict=True):
        assert row["_step"] == STEPS[label]
        assert row["aime25/average_at_n"] == summary["average_at_n"]
        assert row["aime25/pass_at_k/2"] == summary["pass_at_k"]["2"]
        assert row["aime25/average_at_n/ci95_high"] == summary["ci95"]["average_at_n"][1]
        assert row["aime25/gates/aime25.average_at_n ge 0.2"] == 1
    run_id = line.split(": run ")[1].split()[0]
    assert _run_file(offline).name == f"run-{run_id}.wandb"
    assert [m["run_id"] for m in markers(pytester.path / "out" / "aime25-step-300.jsonl")] == [run_id]
    recorded = config(_run_file(offline))
    assert (recorded["seed"], recorded["model/step-300/sha256"]) == (
        "42",
        by_label["step-300"]["model"]["sha256"],
    )
    files = list(_run_file(offline).parent.glob("files/aime25-*"))
    assert not [p for p in files if p.is_symlink()]  # copies: cleaning out/ before `wandb sync` loses nothing
    saved = sorted(p.name for p in files)
    assert saved == [
        "aime25-report.html",
        "aime25-step-100.jsonl",
        "aime25-step-200.jsonl",
        "aime25-step-300.jsonl",
    ]


def test_a_run_id_appends_to_that_run_the_training_step_as_its_axis(
    pytester: pytest.Pytester, offline: Path
) -> None:
    """`wandb:PROJECT/RUN_ID` resumes the run (the training run): its own step is past the
    checkpoints', so the eval rows carry the training step in `agenteval/step`."""
    prepare(pytester.path)
    result = pytester.runpytest_inprocess(*sweep_args("--agenteval-log=wandb:agenteval-test/train-run-7"))
    assert result.ret == 0
    assert _run_file(offline).name == "run-train-run-7.wandb"
    rows = history(_run_file(offline))
    assert [r["agenteval/step"] for r in rows] == [100, 200, 300]
    assert [r["aime25/average_at_n"] for r in rows] == [0.25, 1 / 3, 11 / 12]
