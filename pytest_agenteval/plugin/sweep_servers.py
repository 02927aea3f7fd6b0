"""`--serve` in a sweep: launch the models' servers on the controller before the workers
start (adapters beside their base in one server, one server per full checkpoint or gguf),
count each model's finished items, stop a server as soon as its models are done and start
the next. The logic lives in models/serve/sweep_launch.py; this is the pytest glue."""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import pytest

from pytest_agenteval.models import ModelChoice
from pytest_agenteval.models.cache_folder import run_cache_directory
from pytest_agenteval.models.choice import served_choice
from pytest_agenteval.models.serve.handoff import is_ready
from pytest_agenteval.models.sweep import item_label
from pytest_agenteval.output.results import RESULTS_DIR

SWEEP_SERVERS = pytest.StashKey[Any]()  # models.serve.sweep_launch.SweepServers


class SweepModelLike(Protocol):
    label: str
    source: str


def launch_sweep(
    config: pytest.Config, settings: Any, models: Sequence[SweepModelLike], say: Callable[[str], None]
) -> dict[str, ModelChoice]:
    """Start the sweep's first servers (controller, before xdist starts workers) and return
    each model's choice: the served one for a server that is up, a placeholder its sampler
    waits on for a server that starts later. {} when nothing is launched (no --serve, or
    `--serve auto` without vLLM/SGLang and a GPU: the in-process backends stand).
    The choices travel to workers as `served_choice` reads them (plugin/sweep.py): a
    placeholder's sampler waits on the served file there too; `model_ready(choices)` is the
    Runtime's `model_ready`."""
    if not settings.serve:
        return {}
    from pytest_agenteval.models.serve.launcher import LaunchError
    from pytest_agenteval.models.serve.resolve import resolve_model_path
    from pytest_agenteval.models.serve.sweep_launch import SweepServers

    cache = run_cache_directory(config, settings)  # the weights' hashes: the generation cache's folder
    out = (Path(os.path.expanduser(settings.out)).parent if settings.out else Path(RESULTS_DIR)).resolve()
    try:
        resolved = {
            m.label: resolve_model_path(
                m.source,
                base_model=settings.base_model,
                chat_template=settings.chat_template,
                hash_cache=cache / "model-hashes.json" if cache is not None else None,
            )
            for m in models
        }
        for label, model in resolved.items():
            if model.kind not in ("gguf", "gguf-adapter", "checkpoint", "adapter"):
                raise ValueError(
                    f"--serve launches .gguf files, checkpoints and adapters; model {label} is "
                    f"{model.source}: drop --serve or that --model-path"
                )
        out.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=".agenteval-serve-", dir=out))  # 0700: keys live here
        servers = SweepServers(settings, resolved, folder, out, say)
    except (LaunchError, ValueError) as exc:  # ResolveError is a ValueError
        raise pytest.UsageError(str(exc)) from None
    if not servers.launchable:
        servers.close()
        say("agenteval: no vLLM/SGLang with a GPU here: the sweep's checkpoints run in-process")
        return {}
    config.stash[SWEEP_SERVERS] = servers
    config.add_cleanup(servers.close)
    servers.start_ready()
    servers.announce()  # which wave runs, what each later model waits for
    config.pluginmanager.register(SweepServePlugin(servers), "agenteval-sweep-servers")
    choices = {}
    for label in resolved:
        server = servers.server_of(label)
        if server in servers.launches:
            choices[label] = served_choice(servers.served(label))
        else:
            choices[label] = served_choice(servers.placeholder(label))  # its address to come
    return choices


def summary_choice(config: pytest.Config, label: str, choice: ModelChoice) -> ModelChoice:
    """A model's choice for its summary: where its server was launched, the record of the
    server as it ran (replicas, logs, its notes), in whichever wave it ran."""
    servers = config.stash.get(SWEEP_SERVERS, None)
    if servers is None or label not in servers.models or choice.served is None:
        return choice
    run = servers.launches.get(servers.server_of(label))
    if run is None:  # it never started: its record as known at start-up
        return choice
    return dataclasses.replace(choice, endpoints=tuple(run.endpoints), served=servers.record(label))


def model_ready(choices: Mapping[str, ModelChoice]) -> Callable[[str], bool]:
    """`Runtime.model_ready`: False while a model's server is not up, so prefetch never runs
    ahead into it (a worker's slots full of rollouts waiting on a server that starts only
    when the earlier models finish would never free)."""

    def ready(label: str) -> bool:
        choice = choices.get(label)
        pending = choice.served.pending if choice is not None and choice.served is not None else ""
        return not pending or is_ready(Path(pending))

    return ready


class SweepServePlugin:
    """Controller hooks: each model's item count after collection, each finished item."""

    def __init__(self, servers: Any) -> None:
        self.servers = servers
        self.labels = sorted(servers.models, key=len, reverse=True)  # "a-1" before "a"
        self.counted = False
        self.done: set[str] = set()  # node ids counted as finished

    def _expect(self, nodeids: Sequence[str]) -> None:
        if self.counted:
            return
        self.counted = True
        counts: dict[str, int] = {}
        for nodeid in nodeids:
            label = item_label(nodeid, self.labels)
            if label is not None:
                counts[label] = counts.get(label, 0) + 1
        self.servers.expect(counts)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        self._expect(ids)  # every worker collects the same items: the first one counts

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if session.config.getoption("dist", "no") == "no":  # no xdist: this process collected
            self._expect([item.nodeid for item in session.items])

    @pytest.hookimpl(optionalhook=True, tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """Work stealing that keeps a later wave's items back while a running wave's are
        left (plugin/sweep_waves.py); the plugin's own scheduler otherwise."""
        if config.getoption("dist") != "load" or len(self.servers.plan.waves()) < 2:
            return None
        from pytest_agenteval.plugin.sweep_waves import WaveStealing

        return WaveStealing(config, log, self.waiting)

    def waiting(self, nodeid: str) -> bool:
        """The item's model is a later wave's whose server is not up (nor failed) yet."""
        label = item_label(nodeid, self.labels)
        return label is not None and self.servers.waiting(label)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # an item is done at its teardown, or when its worker died: xdist then reports it
        # with when="???" and no teardown follows (the worker's replacement never runs it)
        if report.when not in ("teardown", "???") or report.nodeid in self.done:
            return
        self.done.add(report.nodeid)
        label = item_label(report.nodeid, self.labels)
        if label is not None:
            self.servers.finished(label)
