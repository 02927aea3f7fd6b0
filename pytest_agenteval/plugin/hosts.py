"""Workers beyond this machine (pytest-xdist `--tx ssh=...`, `--tx socket=...`, or
`--tx popen//chdir=DIR`): what a worker needs that it cannot work out where it runs.

A remote worker starts in another directory (often on another host), so the
controller hands it, through `workerinput`: every path option resolved against the
controller's working directory (mapped into the worker's rsync copy when the file
lies under an `--rsyncdir`), the cache directory, and where it sits among the workers
of its host, so that limits of a host's own resources (sandbox processes, a server on
localhost) are split among that host's workers, not among every worker of the run."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from pytest_agenteval.config.options import Settings

# Options naming files or folders a worker reads (the controller alone writes results).
WORKER_PATH_OPTIONS = (
    "model_path",
    "base_model",
    "chat_template",
    "tokenizer",
    "dataset_path",
    "bfcl_data_dir",
    "gaia_path",
    "datagen_path",
    "reference_path",
    "datagen_verifications",
)
PATHS_KEY = "agenteval_paths"
HOST_KEY = "agenteval_host"  # (index among its host's workers, workers on that host)
_LOOPBACK = {"localhost", "127.0.0.1", "::1", ""}
_REPLAY = "replay:"


def host_of(spec: Any) -> str:
    """The machine an execnet spec runs on, as the user named it ("localhost": here)."""
    if getattr(spec, "via", None):
        return f"via:{spec.via}"  # a popen started through a proxy gateway runs there
    if getattr(spec, "ssh", None):  # ssh's own options may come first: `-p 2222 -i KEY user@host`
        name = str(spec.ssh).split()[-1].rpartition("@")[2]
    elif getattr(spec, "socket", None):
        name = str(spec.socket).rpartition(":")[0].strip("[]")
    elif getattr(spec, "vagrant_ssh", None):
        name = f"vagrant:{spec.vagrant_ssh}"
    else:
        return "localhost"  # popen, with or without chdir
    return "localhost" if name in _LOOPBACK else name


def placement(specs: Sequence[Any], spec: Any) -> tuple[int, int]:
    """(index of spec among the workers of its host, how many workers that host runs)."""
    host = host_of(spec)
    same = [s for s in specs if host_of(s) == host]
    index = next((i for i, s in enumerate(same) if s is spec), 0)
    return index, len(same)


def share(total: int, index: int, count: int) -> int:
    """Worker `index` of `count`'s part of `total` (at least 1; the remainder to the first)."""
    return max(1, total // count + (1 if index < total % count else 0))


def check_concurrency(config: pytest.Config, settings: Settings, choice: Any) -> None:
    """--concurrency (with auto: --concurrency-max) holds per endpoint only while every
    xdist worker can have a slot of it: a usage error at start-up otherwise (the
    controller, before any request)."""
    if choice.kind != "openai" or not config.pluginmanager.hasplugin("xdist"):
        return
    if not config.getoption("tx", None) or config.getoption("dist", "no") == "no":
        return
    from xdist.workermanage import parse_tx_spec_config

    workers = workers_per_endpoint(parse_tx_spec_config(config), host_local(choice.endpoints))
    flag = "--concurrency-max" if settings.concurrency == "auto" else "--concurrency"
    error = concurrency_error(settings.concurrency_ceiling, workers, flag)
    if error:
        raise pytest.UsageError(error)


def workers_per_endpoint(tx: Sequence[str], per_host: bool) -> int:
    """How many xdist workers share one endpoint's `--concurrency`: every worker, or
    (per_host: a replica on each worker's own machine) the most on any one host. `tx` is
    xdist's expanded list of worker specs (`-n 3` is three `popen`)."""
    import execnet  # xdist's own dependency: only where workers are asked for

    specs = [execnet.XSpec(spec) for spec in tx]
    if not per_host:
        return len(specs)
    by_host: dict[str, int] = {}
    for spec in specs:
        by_host[host_of(spec)] = by_host.get(host_of(spec), 0) + 1
    return max(by_host.values(), default=0)


def concurrency_error(concurrency: int, workers: int, flag: str = "--concurrency") -> str | None:
    """One line when `--concurrency` cannot hold: each worker keeps at least one request in
    flight, so W workers on one endpoint exceed a C below W."""
    if workers <= concurrency:
        return None
    return (
        f"{flag} {concurrency} is below the {workers} xdist workers that share each endpoint: "
        f"each worker sends at least one request at a time, so an endpoint would get {workers}; "
        f"pass {flag} {workers} or more, or fewer workers (-n {concurrency})"
    )


def host_local(endpoints: Sequence[str]) -> bool:
    """Whether every endpoint is on the worker's own machine (a replica per host), so
    its concurrency limit is split among that host's workers only."""
    return bool(endpoints) and all((urlsplit(url).hostname or "") in _LOOPBACK for url in endpoints)


def _resolve(value: str, roots: Sequence[Path], remote: bool) -> str:
    """Absolute path of value (as the controller sees it); under an rsync root and on a
    worker elsewhere, the path of the worker's copy (relative to the worker's cwd)."""
    prefix = _REPLAY if value.startswith(_REPLAY) else ""
    path = Path(value[len(prefix) :]).expanduser()
    if not path.exists():
        return value  # a hub id or a model name: the worker resolves it itself
    path = path.resolve()
    if remote:
        for root in roots:
            if path == root or root in path.parents:
                return prefix + str(Path(root.name) / path.relative_to(root))
    return prefix + str(path)


def worker_paths(
    settings: Settings, spec: Any, roots: Sequence[Path], cache_dir: Path | None
) -> dict[str, str | None]:
    """Path settings for the worker of `spec` (only those that need rewriting)."""
    remote = not getattr(spec, "popen", False) or bool(getattr(spec, "chdir", None))
    remote_host = host_of(spec) != "localhost"
    out: dict[str, str | None] = {}
    for name in WORKER_PATH_OPTIONS:
        value = getattr(settings, name)
        if value:
            out[name] = _resolve(value, roots, remote)
    if cache_dir is not None and (not remote_host or settings.cache_dir):
        # Shared, never the rsync copy: same machine, or a folder the user named (NFS).
        out["cache_dir"] = str(Path(cache_dir).expanduser().resolve())
    return out


def on_worker(settings: Settings, workerinput: Mapping[str, Any]) -> Settings:
    """The settings a worker runs with: the controller's resolved paths replace its own."""
    paths = workerinput.get(PATHS_KEY) or {}
    return dataclasses.replace(settings, **paths) if paths else settings


SERVE_REFUSAL = (
    "--serve launches on this machine's 127.0.0.1, which the remote worker --tx {tx} cannot "
    "reach; start a server every host can reach and pass --endpoint URL instead"
)


def refuse_remote_workers(config: pytest.Config, reason: str = SERVE_REFUSAL) -> None:
    """A usage error where a worker runs on another machine (an xdist `--tx` other than a
    local popen) while something of the run lives on this one only: by default a launched
    server, which listens on the controller's loopback. `reason` is the message, with
    `{tx}` standing for the worker's spec."""
    try:
        import execnet
    except ImportError:
        return
    for tx in config.getoption("tx", None) or []:
        if host_of(execnet.XSpec(tx)) != "localhost":
            raise pytest.UsageError(reason.format(tx=tx))
