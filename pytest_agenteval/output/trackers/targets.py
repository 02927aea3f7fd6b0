"""`--agenteval-log URI`: where the results go. `mlflow:` (the tracking URI from
MLFLOW_TRACKING_URI) or `mlflow:http://host:5000`, with `?experiment=NAME&run_id=ID`;
`wandb:PROJECT[/RUN_ID]`; `swanlab:PROJECT[/EXPERIMENT]`. Each needs its package, an extra
of ours (`pip install 'pytest-agenteval[mlflow]'`): a missing one is refused at start-up."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit

from pytest_agenteval.config.packages import installed
from pytest_agenteval.config.redact import without_credentials

KINDS = ("mlflow", "wandb", "swanlab")
_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


@dataclass(frozen=True)
class Target:
    """One `--agenteval-log` value, parsed. `shown` is the value without credentials (a
    URL's user and password), the only form ever printed or written to a results file."""

    kind: str  # mlflow | wandb | swanlab
    shown: str
    location: str = ""  # mlflow: the tracking URI ("" : MLFLOW_TRACKING_URI or MLflow's default)
    project: str = ""  # mlflow: the experiment; wandb, swanlab: the project
    run: str = ""  # mlflow, wandb: the run id to append to; swanlab: the experiment's name


def _checked_location(location: str) -> None:
    """A tracking server's URL that MLflow could not reach anyway (a malformed IPv6 host, a port
    that is not a number) is refused here, at start-up, not after the run."""
    shown = without_credentials(location)
    fix = "give mlflow:http://HOST:PORT[?experiment=NAME&run_id=ID], e.g. mlflow:http://127.0.0.1:5000"
    try:
        parts = urlsplit(location)
        _ = parts.port  # a port that is not a number raises ValueError
    except ValueError as exc:
        raise ValueError(f"--agenteval-log mlflow:{shown}: not a valid URL ({exc}); {fix}") from None
    if parts.scheme in ("http", "https") and not parts.hostname:
        raise ValueError(f"--agenteval-log mlflow:{shown}: no host in the URL; {fix}")


def _mlflow(rest: str) -> Target:
    location, _, query = rest.partition("?")
    shown_location = without_credentials(location)
    asked = dict(parse_qsl(query, keep_blank_values=True))
    unknown = sorted(set(asked) - {"experiment", "run_id"})
    if unknown:
        raise ValueError(
            f"--agenteval-log mlflow:{shown_location}: unknown parameter "
            f"{unknown[0]!r}; use ?experiment=NAME and/or &run_id=ID"
        )
    _checked_location(location)
    query_shown = urlencode(asked)
    shown = "mlflow:" + shown_location + (f"?{query_shown}" if query_shown else "")
    return Target("mlflow", shown, location, asked.get("experiment", ""), asked.get("run_id", ""))


def _project(kind: str, rest: str, second: str) -> Target:
    project, _, run = rest.partition("/")
    for part, what in ((project, "PROJECT"), (run, second)):
        if (part or what == "PROJECT") and not _NAME.match(part):
            raise ValueError(
                f"--agenteval-log {kind}:{rest}: give {kind}:PROJECT[/{second}] (letters, digits, "
                f"'.', '_', '-'), e.g. {kind}:my-project"
            )
    return Target(kind, f"{kind}:{rest}", "", project, run)


def parse_target(value: str) -> Target:
    """One `--agenteval-log` value; ValueError with one line naming the fix."""
    kind, sep, rest = value.partition(":")
    if not sep or kind not in KINDS:
        raise ValueError(
            f"--agenteval-log: unknown tracker {kind!r}; give mlflow:[URI][?experiment=NAME"
            "&run_id=ID], wandb:PROJECT[/RUN_ID] or swanlab:PROJECT[/EXPERIMENT]"
        )
    if kind == "mlflow":
        return _mlflow(rest)
    return _project(kind, rest, "RUN_ID" if kind == "wandb" else "EXPERIMENT")


def check_targets(values: tuple[str, ...] | list[str]) -> list[Target]:
    """The parsed targets, each tracker's package present; ValueError naming the extra."""
    targets = [parse_target(value) for value in values]
    for target in targets:
        if not installed(target.kind):
            raise ValueError(
                f"--agenteval-log {target.shown}: the {target.kind} package is not installed; "
                f"install it with pip install 'pytest-agenteval[{target.kind}]'"
            )
    return targets


def mlflow_location(target: Target) -> str:
    """The tracking URI a target names, or MLFLOW_TRACKING_URI's ("" : MLflow's default)."""
    return target.location or os.environ.get("MLFLOW_TRACKING_URI", "")
