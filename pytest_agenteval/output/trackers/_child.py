"""The process that calls one tracker's library (`python -m
pytest_agenteval.output.trackers._child`): it reads (target, runs) pickled on stdin, logs each
run and answers one JSON line per run on its stdout (`{"run_id": ...}`, or `{"error": ...}`
and it stops). Everything else the library writes, to stdout, stderr or its loggers (MLflow's
`View run ... at: URL`, SwanLab's retries and banner, W&B's warnings), goes to /dev/null,
as do its own subprocesses' (wandb-core). The parent (send.py) kills its process group at the
deadline: a library's teardown (W&B's finish against a host that never answers) cannot
outlast it."""

from __future__ import annotations

import json
import logging
import os
import pickle
import sys
from collections.abc import Callable
from typing import IO

from pytest_agenteval.config.redact import without_credentials
from pytest_agenteval.output.trackers.plan import TrackedRun
from pytest_agenteval.output.trackers.targets import Target


def sender(kind: str) -> Callable[[Target, TrackedRun], str]:
    if kind == "mlflow":
        from pytest_agenteval.output.trackers.mlflow_run import log_run
    elif kind == "wandb":
        from pytest_agenteval.output.trackers.wandb_run import log_run
    else:
        from pytest_agenteval.output.trackers.swanlab_run import log_run
    return log_run


def why(exc: BaseException) -> str:
    """One line of what went wrong, credentials removed."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return without_credentials(f"{type(exc).__name__}: {text}")[:240]


def _silenced() -> IO[str]:
    """Our answers' channel (the stdout we were given); fds 1 and 2 to /dev/null, for the
    library and every process it starts."""
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")  # not inherited by subprocesses
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    logging.disable(logging.CRITICAL)
    return answers


def main() -> int:
    answers = _silenced()
    target, runs = pickle.load(sys.stdin.buffer)
    for run in runs:
        try:
            answer = {"run_id": sender(target.kind)(target, run)}
        except Exception as exc:  # noqa: BLE001 - any failure of a tracker is one line
            answer = {"error": why(exc)}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
        if "error" in answer:
            break
    answers.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
