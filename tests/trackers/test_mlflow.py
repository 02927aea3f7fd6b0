"""--agenteval-log mlflow: against a real `mlflow server` (SQLite backend, artifacts in a
temporary folder, a loopback port), started once for the module, read back through
MLflow's own client. The server takes 20-60 s to start on 2 busy cores: this module's
tests share it and one logged sweep."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._oracle import require_oracle
from tests.trackers import mlflow_server
from tests.trackers.sweep_runs import STEPS, markers, prepare, run_sweep, summaries, sweep_args


@pytest.fixture(scope="module", autouse=True)
def _mlflow_installed() -> None:
    try:
        import mlflow  # noqa: F401
    except ImportError:
        require_oracle("needs mlflow: pip install -e '.[mlflow]' (README command 2)")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def mlflow_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    try:
        server, url = mlflow_server.start(tmp_path_factory.mktemp("mlflow"))
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield url
    finally:
        mlflow_server.stop(server)


@pytest.fixture(scope="module")
def logged(mlflow_url: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path, str]:
    """The sweep, logged once, run on two xdist workers: (the finished process, its folder,
    the run id)."""
    folder = prepare(tmp_path_factory.mktemp("sweep"))
    done = run_sweep(folder, f"--agenteval-log=mlflow:{mlflow_url}?experiment=sweep", "-n", "2")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (line,) = [
        x for x in done.stdout.splitlines() if x.startswith(f"agenteval: logged to mlflow:{mlflow_url}")
    ]
    run_id = line.split(": run ")[1].split()[0]
    return done, folder, run_id


def _client(url: str) -> Any:
    from mlflow import MlflowClient

    return MlflowClient(url)


def test_the_metric_history_has_each_checkpoint_at_its_step_with_its_summary_value(
    mlflow_url: str, logged: tuple
) -> None:
    _, folder, run_id = logged
    history = _client(mlflow_url).get_metric_history(run_id, "aime25/average_at_n")
    expected = {STEPS[label]: s["average_at_n"] for label, s in summaries(folder / "out").items()}
    assert sorted((m.step, m.value) for m in history) == sorted(expected.items())
    assert expected == {100: 0.25, 200: 1 / 3, 300: 11 / 12}  # the recorded runs: 6, 8 and 22 of 24


def test_every_summary_metric_is_logged_with_its_interval_and_resources(
    mlflow_url: str, logged: tuple
) -> None:
    _, folder, run_id = logged
    client = _client(mlflow_url)
    summary = summaries(folder / "out")["step-300"]
    for name, value in [
        ("aime25/pass_at_k/2", summary["pass_at_k"]["2"]),
        ("aime25/average_at_n/ci95_low", summary["ci95"]["average_at_n"][0]),
        ("aime25/average_at_n/ci95_high", summary["ci95"]["average_at_n"][1]),
        ("aime25/tokens/completion", 0.0),
        ("aime25/requests/generations", 24.0),
        ("aime25/wall_time_s", summary["duration_s"]),
        ("aime25/gates/aime25.average_at_n ge 0.2", 1.0),
    ]:
        points = {m.step: m.value for m in client.get_metric_history(run_id, name)}
        assert points[300] == value, name


def test_the_params_hold_the_model_identity_and_seed(mlflow_url: str, logged: tuple) -> None:
    _, folder, run_id = logged
    params = _client(mlflow_url).get_run(run_id).data.params
    for label, summary in summaries(folder / "out").items():
        assert params[f"model/{label}/sha256"] == summary["model"]["sha256"]
        assert params[f"model/{label}/name"] == summary["model"]["name"]
    assert (params["seed"], params["val_n"]) == ("42", "2")
    assert params["aime25/dataset_sha256"] == summaries(folder / "out")["step-100"]["dataset_sha256"]


def test_the_gate_verdicts_are_tags(mlflow_url: str, logged: tuple) -> None:
    tags = _client(mlflow_url).get_run(logged[2]).data.tags
    assert tags["gate/step-100/aime25.average_at_n ge 0.2"].startswith("PASS aime25.average_at_n >= 0.2")
    assert tags["agenteval.models"] == "step-100, step-200, step-300"


def test_the_artifacts_are_the_results_files_and_the_report(mlflow_url: str, logged: tuple) -> None:
    artifacts = _client(mlflow_url).list_artifacts(logged[2])
    assert sorted(a.path for a in artifacts) == [
        "aime25-report.html",
        "aime25-step-100.jsonl",
        "aime25-step-200.jsonl",
        "aime25-step-300.jsonl",
    ]


def test_each_results_file_is_marked_with_the_run_it_was_logged_to(mlflow_url: str, logged: tuple) -> None:
    _, folder, run_id = logged
    for label, step in STEPS.items():
        (marker,) = markers(folder / "out" / f"aime25-{label}.jsonl")
        assert (marker["target"], marker["run_id"], marker["model_label"], marker["step"]) == (
            f"mlflow:{mlflow_url}?experiment=sweep",
            run_id,
            label,
            step,
        )


def test_with_xdist_the_controller_logs_once(mlflow_url: str, logged: tuple) -> None:
    client = _client(mlflow_url)
    (run,) = client.search_runs([client.get_experiment_by_name("sweep").experiment_id])
    assert run.info.run_id == logged[2]
    assert len(client.get_metric_history(run.info.run_id, "aime25/average_at_n")) == 3


def test_a_rerun_with_the_same_numbers_notes_the_logged_run_unless_asked_to_log_again(
    mlflow_url: str, logged: tuple, pytester: pytest.Pytester
) -> None:
    _, folder, run_id = logged
    shutil.copytree(folder, pytester.path, dirs_exist_ok=True)  # the suite, and the results files
    target = f"--agenteval-log=mlflow:{mlflow_url}?experiment=sweep"
    again = pytester.runpytest_inprocess(*sweep_args(target))
    assert (
        f"agenteval: already logged to mlflow:{mlflow_url}?experiment=sweep (run {run_id}, step-100, "
        "step-200, step-300): the same numbers; --agenteval-log-always logs them again"
    ) in again.outlines
    assert [m["run_id"] for m in markers(pytester.path / "out" / "aime25-step-200.jsonl")] == [run_id]
    client = _client(mlflow_url)
    experiment = client.get_experiment_by_name("sweep").experiment_id
    assert len(client.search_runs([experiment])) == 1
    forced = pytester.runpytest_inprocess(*sweep_args(target, "--agenteval-log-always"))
    (line,) = [x for x in forced.outlines if x.startswith("agenteval: logged to")]
    assert run_id not in line and len(client.search_runs([experiment])) == 2
    assert (again.ret, forced.ret) == (0, 0)


def test_a_tracker_that_is_down_costs_one_warning_line_and_nothing_else(pytester: pytest.Pytester) -> None:
    prepare(pytester.path)
    closed = f"mlflow:http://127.0.0.1:{_free_port()}"
    started = time.monotonic()
    result = pytester.runpytest_inprocess(*sweep_args(f"--agenteval-log={closed}"))
    took = time.monotonic() - started
    assert result.ret == 0  # as without --agenteval-log
    (warning,) = [x for x in result.outlines if x.startswith("agenteval: WARNING")]
    assert warning.startswith(f"agenteval: WARNING could not log to {closed} (MlflowException: ")
    assert warning.endswith(
        "the results are kept in out/aime25-step-100.jsonl, out/aime25-step-200.jsonl, "
        "out/aime25-step-300.jsonl"
    )
    assert took < 30
    assert summaries(pytester.path / "out")["step-300"]["average_at_n"] == 11 / 12
    assert not markers(pytester.path / "out" / "aime25-step-100.jsonl")


def test_a_run_id_appends_the_checkpoints_to_the_training_run(
    mlflow_url: str, pytester: pytest.Pytester
) -> None:
    client = _client(mlflow_url)
    training = client.create_run(client.create_experiment("training"), run_name="rl").info.run_id
    for step in (100, 200, 300):
        client.log_metric(training, "train/loss", 1 / step, step=step)
    client.log_param(training, "seed", "7")  # the training's own: params are set once
    prepare(pytester.path)
    result = pytester.runpytest_inprocess(
        *sweep_args(f"--agenteval-log=mlflow:{mlflow_url}?run_id={training}")
    )
    assert result.ret == 0
    assert f"agenteval: logged to mlflow:{mlflow_url}?run_id={training}: run {training} " in "\n".join(
        result.outlines
    )
    history = client.get_metric_history(training, "aime25/average_at_n")
    assert sorted((m.step, m.value) for m in history) == [(100, 0.25), (200, 1 / 3), (300, 11 / 12)]
    assert len(client.get_metric_history(training, "train/loss")) == 3
    run = client.get_run(training)
    assert run.data.params["seed"] == "7" and "model/step-300/sha256" in run.data.params
    assert run.info.status == "RUNNING"  # the training run's to end, not ours


def test_a_bare_mlflow_target_uses_mlflow_tracking_uri(
    mlflow_url: str, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_url)
    prepare(pytester.path)
    result = pytester.runpytest_inprocess(*sweep_args("--agenteval-log=mlflow:?experiment=from-env"))
    assert result.ret == 0
    client = _client(mlflow_url)
    (run,) = client.search_runs([client.get_experiment_by_name("from-env").experiment_id])
    assert f"agenteval: logged to mlflow:?experiment=from-env: run {run.info.run_id} " in "\n".join(
        result.outlines
    )


def test_a_uri_s_credentials_are_never_printed_nor_written(
    mlflow_url: str, pytester: pytest.Pytester
) -> None:
    """The user and password of `mlflow:http://alice:s3cret@...` reach the tracking server
    only: the results files, the run's params and the terminal hold the URI without them,
    and MLflow's own `View run ... at: URL` print is not shown."""
    prepare(pytester.path)
    with_password = mlflow_url.replace("http://", "http://alice:s3cret@")
    result = pytester.runpytest_inprocess(
        *sweep_args(f"--agenteval-log=mlflow:{with_password}?experiment=cred")
    )
    assert result.ret == 0
    printed = result.stdout.str() + result.stderr.str()
    assert "s3cret" not in printed
    assert "View run" not in printed
    (line,) = [x for x in result.outlines if x.startswith("agenteval: logged to")]
    assert line.startswith(f"agenteval: logged to mlflow:{mlflow_url}?experiment=cred: run ")
    for path in (pytester.path / "out").iterdir():
        assert "s3cret" not in path.read_text(encoding="utf-8"), path
    client = _client(mlflow_url)
    (run,) = client.search_runs([client.get_experiment_by_name("cred").experiment_id])
    assert run.data.params["config/log_targets"] == f'["mlflow:{mlflow_url}?experiment=cred"]'
    assert not [k for k, v in {**run.data.params, **run.data.tags}.items() if "s3cret" in v]


def test_merge_prints_no_credentials_either(mlflow_url: str, pytester: pytest.Pytester) -> None:
    prepare(pytester.path)
    one = ["-p", "no:cacheprovider", "--dataset-path=sweep/problems.jsonl", "--mode=text-only", "--val-n=2"]
    for index in (0, 1):
        pytester.runpytest_inprocess(
            *one, "--model-path=replay:sweep/step-200.jsonl", f"--agenteval-shard={index}/2",
            f"--agenteval-out=shard-{index}.jsonl",
        )  # fmt: skip
    with_password = mlflow_url.replace("http://", "http://alice:s3cret@")
    done = subprocess.run(
        [sys.executable, "-m", "pytest_agenteval", "merge", "shard-0.jsonl", "shard-1.jsonl",
         "-o", "all.jsonl", f"--agenteval-log=mlflow:{with_password}?experiment=merged"],
        cwd=pytester.path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert f"agenteval: logged to mlflow:{mlflow_url}?experiment=merged: run " in done.stdout
    assert "s3cret" not in done.stdout + done.stderr + (pytester.path / "all.jsonl").read_text(
        encoding="utf-8"
    )
    assert "View run" not in done.stdout
