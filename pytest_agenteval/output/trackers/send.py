"""Logging a run's results to its trackers, on the controller, once, at the end. Each target
is logged by a process of its own (`_child.py`: the library's output silenced, so a logged
target is our one line and a failed one our one warning), the targets side by side, all waited
on DEADLINE_S in all: a tracker that is down or never answers costs one warning line, never
the exit status or the results files, and its process group is killed then (a library's own
teardown cannot outlast the deadline). MLflow's client retries a closed port for minutes
unless told otherwise: its retries and timeout are set, in that process, to fit (unless the
user set them)."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_agenteval.config.redact import without_credentials
from pytest_agenteval.output.trackers import markers
from pytest_agenteval.output.trackers._child import why
from pytest_agenteval.output.trackers.flatten import fingerprint
from pytest_agenteval.output.trackers.plan import ModelResults, TrackedRun, plan_runs
from pytest_agenteval.output.trackers.targets import Target

DEADLINE_S = 30.0
MLFLOW_ENV = {  # set for the tracker's process, where the user has not set them
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "0",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",  # `View run ... at: URL`, credentials and all
}
# read by the libraries themselves at every init: we pass the run to append to explicitly, to
# the run of the models with a step only (`plan_runs`)
_NOT_PASSED = ("SWANLAB_RUN_ID",)
_CHILD = "pytest_agenteval.output.trackers._child"
_KILL_GRACE_S = 5.0  # a killed child's pipe closes at once; this only bounds the join


def child_environment() -> dict[str, str]:
    """The tracker process's environment: ours, MLflow's bounds where unset, less what a
    library would apply to every run it starts."""
    env = {**MLFLOW_ENV, **os.environ}
    for name in _NOT_PASSED:
        env.pop(name, None)
    return env


def append_to(target: Target) -> str:
    """The run the models with a step go into: `wandb:P/RUN_ID`, `mlflow:...?run_id=ID`,
    SwanLab's SWANLAB_RUN_ID (`swanlab:P/EXPERIMENT` names an experiment, not a run)."""
    if target.kind == "swanlab":
        return os.environ.get("SWANLAB_RUN_ID", "")
    return target.run


def _kill(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # the child and what it started (wandb-core)


def send_runs(target: Target, runs: Sequence[TrackedRun], end: float) -> tuple[list[dict[str, Any]], bool]:
    """Log `runs` to `target` in a process of its own, until `end` (time.monotonic()) at most:
    its answers, one per run logged (`run_id`) or the one that failed (`error`: the library's
    exception, or the last line the process said where it could not start), and whether it
    was stopped at the deadline."""
    process = subprocess.Popen(
        [sys.executable, "-m", _CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,  # only what it says before it silences itself (it could not start)
        env=child_environment(),
        start_new_session=True,  # its own process group, killed whole at the deadline
    )
    stopped = False
    try:
        out, err = process.communicate(
            pickle.dumps((target, list(runs))), timeout=max(0.1, end - time.monotonic())
        )
    except subprocess.TimeoutExpired:
        stopped = True
        _kill(process)
        out, err = process.communicate()
    finally:
        if process.poll() is None:
            _kill(process)
            process.wait()
    answers = []
    for line in out.decode("utf-8", "replace").splitlines():
        with contextlib.suppress(ValueError):
            answers.append(json.loads(line))
    said = err.decode("utf-8", "replace").strip().splitlines()
    if len(answers) < len(runs) and not stopped and said:  # it ended without answering
        answers.append({"error": without_credentials(said[-1])[:240]})
    return answers, stopped


class _Logging:
    """The work of one target's thread: its runs, the lines to print, the markers to add."""

    def __init__(self, target: Target, models: Sequence[ModelResults], report: Path | None,
                 always: bool, previous: Sequence[Mapping[str, Any]], deadline_s: float) -> None:  # fmt: skip
        self.target, self.models, self.report = target, list(models), report
        self.always, self.previous, self.deadline_s = always, list(previous), deadline_s
        self.end = time.monotonic() + deadline_s
        self.lines: list[str] = []
        self.new_markers: list[tuple[Path, dict[str, Any]]] = []

    def run(self) -> None:
        try:
            self._runs()
        except Exception as exc:  # noqa: BLE001 - any failure of a tracker is one line
            self.lines.append(f"WARNING could not log to {self.target.shown} ({why(exc)}); {self.kept()}")

    def kept(self) -> str:
        files = [str(m.file) for m in self.models if m.file is not None]
        return f"the results are kept in {', '.join(files)}" if files else "the results are kept"

    def no_answer(self) -> str:
        return (
            f"WARNING could not log to {self.target.shown} within {self.deadline_s:.0f} s (no answer); "
            f"{self.kept()}"
        )

    def _runs(self) -> None:
        target = self.target
        planned = []
        for run in plan_runs(self.models, append_to(self.target), self.report):
            prints = {m.label: fingerprint(target.shown, m.label, m.step, m.summaries) for m in run.models}
            found = [markers.find(self.previous, target.shown, p) for p in prints.values()]
            planned.append((run, prints, found, not self.always and all(found)))
        to_send = [run for run, _, _, done in planned if not done]
        answers, stopped = send_runs(target, to_send, self.end) if to_send else ([], False)
        answered = iter(answers)
        for run, prints, found, done in planned:
            if done:
                run_id = str(found[0]["run_id"])  # type: ignore[index]
                self.lines.append(
                    f"already logged to {target.shown} (run {run_id}, {', '.join(prints)}): the same "
                    "numbers; --agenteval-log-always logs them again"
                )
            else:
                answer = next(answered, None)
                if answer is None or "error" in answer:
                    failed = "no answer" if answer is None else answer["error"]
                    if answer is None and stopped:
                        self.lines.append(self.no_answer())
                    else:
                        self.lines.append(
                            f"WARNING could not log to {target.shown} ({failed}); {self.kept()}"
                        )
                    return
                run_id = str(answer["run_id"])
                self.lines.append(f"logged to {target.shown}: run {run_id} ({_models_line(run.models)})")
            for model, before in zip(run.models, found, strict=True):
                if model.file is not None:  # a marker carried over keeps when it was logged
                    line = markers.marker(target.shown, run_id, model.label, model.step, prints[model.label])
                    logged = before if before and done else line
                    self.new_markers.append((model.file, {**line, "logged_at": logged["logged_at"]}))


def _models_line(models: Sequence[ModelResults]) -> str:
    return ", ".join(m.label + (f" at step {m.step}" if m.step is not None else "") for m in models)


def log_results(
    targets: Sequence[Target],
    models: Sequence[ModelResults],
    report: Path | None = None,
    always: bool = False,
    previous: Sequence[Mapping[str, Any]] = (),
    deadline_s: float = DEADLINE_S,
) -> list[str]:
    """Log every model to every target, the targets side by side, each in a thread waited
    on until `deadline_s` from now at most; the lines to print (what was logged where, one
    warning per target that failed or did not answer). The markers go into the results files."""
    works = [_Logging(target, models, report, always, previous, deadline_s) for target in targets]
    threads = [threading.Thread(target=w.run, name="agenteval-trackers", daemon=True) for w in works]
    end = time.monotonic() + deadline_s + _KILL_GRACE_S
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, end - time.monotonic()))
    lines: list[str] = []
    marked: dict[Path, list[dict[str, Any]]] = {}
    for work, thread in zip(works, threads, strict=True):
        if thread.is_alive():  # its child outlived a kill: nothing waits for it
            lines.append(work.no_answer())
            continue
        lines += work.lines
        for path, line in work.new_markers:
            marked.setdefault(path, []).append(line)
    for path, lines_of in marked.items():
        try:
            markers.append_markers(path, lines_of)
        except OSError as exc:
            lines.append(f"WARNING could not mark {path} as logged ({why(exc)})")
    return lines


def log_target(value: str) -> Target:
    """`pytest-agenteval merge --agenteval-log URI`: the target, checked as a run checks it."""
    import argparse

    from pytest_agenteval.output.trackers.targets import check_targets

    try:
        return check_targets([value])[0]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix(f"--agenteval-log {value}: ")) from None


def log_merged(
    targets: Sequence[Target],
    summaries: Sequence[Mapping[str, Any]],
    written: Path | None,
    always: bool = False,
    previous: Sequence[Mapping[str, Any]] = (),
) -> list[str]:
    """A merge's one model, logged as a run logs it (a merge is where shards are logged)."""
    if not targets or not summaries:
        return []
    from pytest_agenteval.output.trackers.plan import single_model

    return log_results(targets, [single_model(summaries, written)], None, always, previous)
