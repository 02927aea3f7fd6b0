"""Logging a run's results to its trackers, on the controller, once, at the end. Every call
runs in one thread the caller waits on for at most DEADLINE_S: a tracker that is down costs
one warning line, never the exit status or the results files. MLflow's client retries a
closed port for minutes unless told otherwise: its retries and timeout are set, around our
calls only, to fit (unless the user set them)."""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_agenteval.output.trackers import markers
from pytest_agenteval.output.trackers.flatten import fingerprint
from pytest_agenteval.output.trackers.plan import ModelResults, TrackedRun, plan_runs
from pytest_agenteval.output.trackers.targets import Target

DEADLINE_S = 30.0
MLFLOW_ENV = {  # set around our calls only, where the user has not set them
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "0",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
}
_CREDENTIALS = re.compile(r"//[^/@\s]+@")


def _sender(kind: str) -> Callable[[Target, TrackedRun], str]:
    if kind == "mlflow":
        from pytest_agenteval.output.trackers.mlflow_run import log_run
    elif kind == "wandb":
        from pytest_agenteval.output.trackers.wandb_run import log_run
    else:
        from pytest_agenteval.output.trackers.swanlab_run import log_run
    return log_run


@contextlib.contextmanager
def _environment(values: Mapping[str, str]) -> Iterator[None]:
    added = [name for name in values if name not in os.environ]
    os.environ.update({name: values[name] for name in added})
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def _why(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return _CREDENTIALS.sub("//", f"{type(exc).__name__}: {text}")[:240]


class _Logging:
    """The work of one target's thread: its runs, the lines to print, the markers to add."""

    def __init__(self, target: Target, models: Sequence[ModelResults], report: Path | None,
                 always: bool, previous: Sequence[Mapping[str, Any]]) -> None:  # fmt: skip
        self.target, self.models, self.report = target, list(models), report
        self.always, self.previous = always, list(previous)
        self.lines: list[str] = []
        self.new_markers: list[tuple[Path, dict[str, Any]]] = []

    def run(self) -> None:
        try:
            self._runs()
        except Exception as exc:  # noqa: BLE001 - any failure of a tracker is one line
            self.lines.append(f"WARNING could not log to {self.target.shown} ({_why(exc)}); {self.kept()}")

    def kept(self) -> str:
        files = [str(m.file) for m in self.models if m.file is not None]
        return f"the results are kept in {', '.join(files)}" if files else "the results are kept"

    def _runs(self) -> None:
        target = self.target
        for run in plan_runs(self.models, target.run if target.kind != "swanlab" else "", self.report):
            prints = {m.label: fingerprint(target.shown, m.label, m.step, m.summaries) for m in run.models}
            found = [markers.find(self.previous, target.shown, p) for p in prints.values()]
            if not self.always and all(found):
                run_id = str(found[0]["run_id"])  # type: ignore[index]
                self.lines.append(
                    f"already logged to {target.shown} (run {run_id}, {', '.join(prints)}): the same "
                    "numbers; --agenteval-log-always logs them again"
                )
            else:
                run_id = _sender(target.kind)(target, run)
                self.lines.append(f"logged to {target.shown}: run {run_id} ({_models_line(run.models)})")
            for model, before in zip(run.models, found, strict=True):
                if model.file is not None:  # a marker carried over keeps when it was logged
                    line = markers.marker(target.shown, run_id, model.label, model.step, prints[model.label])
                    logged = before if before and not self.always and all(found) else line
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
    works = [_Logging(target, models, report, always, previous) for target in targets]
    threads = [threading.Thread(target=w.run, name="agenteval-trackers", daemon=True) for w in works]
    end = time.monotonic() + deadline_s
    with _environment(MLFLOW_ENV):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(max(0.0, end - time.monotonic()))
    lines: list[str] = []
    marked: dict[Path, list[dict[str, Any]]] = {}
    for work, thread in zip(works, threads, strict=True):
        if thread.is_alive():  # it goes on, a daemon, until the process ends: nothing waits for it
            lines.append(
                f"WARNING could not log to {work.target.shown} within {deadline_s:.0f} s (no answer); "
                f"{work.kept()}"
            )
            continue
        lines += work.lines
        for path, line in work.new_markers:
            marked.setdefault(path, []).append(line)
    for path, lines_of in marked.items():
        try:
            markers.append_markers(path, lines_of)
        except OSError as exc:
            lines.append(f"WARNING could not mark {path} as logged ({_why(exc)})")
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
