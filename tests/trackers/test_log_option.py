"""--agenteval-log at start-up (a bad value or a missing tracker package: one line, exit 4),
in a shard (which does not log) and in `pytest-agenteval merge` (which logs the whole)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests._oracle import require_oracle
from tests.trackers.sweep_runs import markers, prepare
from tests.trackers.wandb_file import history

ONE_MODEL = ["-p", "no:cacheprovider", "--dataset-path=sweep/problems.jsonl", "--mode=text-only", "--val-n=2"]


def _one_model(*extra: str) -> list[str]:
    return [*ONE_MODEL, "--model-path=step-300=replay:sweep/step-200.jsonl", *extra]


@pytest.mark.parametrize(
    ("value", "line"),
    [
        (
            "neptune:proj",
            "ERROR: --agenteval-log: unknown tracker 'neptune'; give "
            "mlflow:[URI][?experiment=NAME&run_id=ID], wandb:PROJECT[/RUN_ID] or "
            "swanlab:PROJECT[/EXPERIMENT]",
        ),
        (
            "wandb:my project",
            "ERROR: --agenteval-log wandb:my project: give wandb:PROJECT[/RUN_ID] (letters, digits, '.', "
            "'_', '-'), e.g. wandb:my-project",
        ),
        (
            "mlflow:http://user:secret@tracker:5000?experiment=x&runid=1",
            "ERROR: --agenteval-log mlflow:http://tracker:5000: unknown parameter 'runid'; use "
            "?experiment=NAME and/or &run_id=ID",
        ),
        (
            "mlflow:http://u:secret@[::1",
            "ERROR: --agenteval-log mlflow:http://[::1: not a valid URL (Invalid IPv6 URL); give "
            "mlflow:http://HOST:PORT[?experiment=NAME&run_id=ID], e.g. mlflow:http://127.0.0.1:5000",
        ),
        (
            "mlflow:http://u:secret@127.0.0.1:notaport",
            "ERROR: --agenteval-log mlflow:http://127.0.0.1:notaport: not a valid URL (Port could not be "
            "cast to integer value as 'notaport'); give mlflow:http://HOST:PORT[?experiment=NAME&run_id=ID], "
            "e.g. mlflow:http://127.0.0.1:5000",
        ),
        (
            "mlflow:http://:5000",
            "ERROR: --agenteval-log mlflow:http://:5000: no host in the URL; give "
            "mlflow:http://HOST:PORT[?experiment=NAME&run_id=ID], e.g. mlflow:http://127.0.0.1:5000",
        ),
    ],
)
def test_a_bad_value_is_one_line_at_start_up(pytester: pytest.Pytester, value: str, line: str) -> None:
    prepare(pytester.path)
    result = pytester.runpytest_inprocess(*_one_model(f"--agenteval-log={value}"))
    assert result.ret == 4
    assert line in result.errlines
    assert "secret" not in result.stdout.str() + result.stderr.str()
    assert not list(pytester.path.glob("agenteval-results/*.jsonl"))


@pytest.mark.parametrize("kind", ["mlflow", "wandb", "swanlab"])
def test_a_missing_tracker_package_is_refused_naming_its_extra(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    monkeypatch.setitem(sys.modules, kind, None)  # not importable, as where it is not installed
    prepare(pytester.path)
    result = pytester.runpytest_inprocess(*_one_model(f"--agenteval-log={kind}:proj"))
    assert result.ret == 4
    shown = f"{kind}:proj"
    assert (
        f"ERROR: --agenteval-log {shown}: the {kind} package is not installed; install it with "
        f"pip install 'pytest-agenteval[{kind}]'"
    ) in result.errlines


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    try:
        import wandb  # noqa: F401
    except ImportError:
        require_oracle("needs wandb: pip install -e '.[wandb]' (README command 2)")
    folder = tmp_path / "wandb-home"
    folder.mkdir()
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(folder))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(folder / "config"))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(folder / "cache"))
    return folder


def test_shards_do_not_log_and_their_merge_does(pytester: pytest.Pytester, offline: Path) -> None:
    prepare(pytester.path)
    for index in (0, 1):
        result = pytester.runpytest_inprocess(
            *_one_model(f"--agenteval-shard={index}/2", f"--agenteval-out=shard-{index}.jsonl"),
            "--agenteval-log=wandb:agenteval-test",
        )
        assert (
            "agenteval: a shard does not log (its numbers are partial): log the merged run with "
            "pytest-agenteval merge ... --agenteval-log URI"
        ) in result.outlines
    assert not list(offline.glob("wandb/offline-run-*"))
    merge = [
        sys.executable,
        "-m",
        "pytest_agenteval",
        "merge",
        "shard-0.jsonl",
        "shard-1.jsonl",
        "-o",
        "all.jsonl",
    ]
    merge.append("--agenteval-log=wandb:agenteval-test")
    done = subprocess.run(merge, cwd=pytester.path, capture_output=True, text=True, timeout=120)
    logged = [x for x in done.stdout.splitlines() if x.startswith("agenteval: logged to wandb:")]
    assert len(logged) == 1, done.stdout[-2000:] + done.stderr[-2000:]
    (line,) = logged
    assert line.endswith("(step-300 at step 300)")
    (run_file,) = offline.glob("wandb/offline-run-*/run-*.wandb")
    ((row,),) = [history(run_file)]
    assert (row["_step"], row["aime25/average_at_n"], row["aime25/problems"]) == (300, 11 / 12, 12)
    (marker,) = markers(pytester.path / "all.jsonl")
    assert marker["run_id"] == line.split(": run ")[1].split()[0]
    again = subprocess.run(merge, cwd=pytester.path, capture_output=True, text=True, timeout=120)
    assert (
        f"agenteval: already logged to wandb:agenteval-test (run {marker['run_id']}, step-300)"
        in again.stdout
    )


def test_merge_refuses_a_bad_target_before_reading_the_shards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # not pytester: its sys.modules restore dropped the cli imported here, and a later test
    # of the same process then caught another MergeError class than the merge raised
    from pytest_agenteval.cli import main

    monkeypatch.chdir(tmp_path)

    status = main(["merge", "missing.jsonl", "-o", "all.jsonl", "--agenteval-log=neptune:x"])
    assert status == 4
