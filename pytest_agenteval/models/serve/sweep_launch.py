"""A sweep's launched servers on the controller: start the first ones in model order, stop
a server as soon as every item of its models has finished, start the next in its slot, and
hand each server to the workers through the serve folder (handoff.py). No pytest here: the
plugin (plugin/sweep_servers.py) feeds it collection counts and finished items."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_agenteval.models.serve.commands import (
    SAMPLING_DEFAULTS,
    ServerSpec,
    adapter_request_name,
    adapter_served_name,
    llama_cpp_command,
    llama_cpp_config_command,
    sglang_command,
    vllm_command,
)
from pytest_agenteval.models.serve.handoff import served_file, write_served
from pytest_agenteval.models.serve.launcher import LaunchError, free_port, launch, new_key
from pytest_agenteval.models.serve.record import ServedModel
from pytest_agenteval.models.serve.resolve import ResolvedModel
from pytest_agenteval.models.serve.session import Launch, _version, pick_backend, probe_served_adapter
from pytest_agenteval.models.serve.sweep_plan import PlannedModel, SweepSchedule, plan_servers

ADAPTER_KINDS = ("adapter", "gguf-adapter")  # a PEFT folder on a checkpoint; a gguf LoRA on a gguf


def planned(label: str, model: ResolvedModel) -> PlannedModel:
    if model.kind in ADAPTER_KINDS and model.base is not None:
        return PlannedModel(label, "adapter", str(model.path), str(model.base.path))
    return PlannedModel(label, model.kind, str(model.path))


class SweepServers:
    """The controller's servers of one sweep (models: label -> resolved, in model order)."""

    def __init__(
        self,
        settings: Any,
        models: Mapping[str, ResolvedModel],
        folder: Path,
        log_dir: Path,
        say: Callable[[str], None],
    ) -> None:
        self.settings = settings
        self.models = dict(models)
        self.folder = folder  # private (0700): the served files and llama.cpp config files
        self.log_dir = log_dir
        self.say = say
        self.plan = plan_servers(
            [planned(label, m) for label, m in self.models.items()],
            settings.serve_gpus,
            settings.serve_tp,
            settings.serve_max_servers,
        )
        self.schedule = SweepSchedule(self.plan)
        self.backends = [
            pick_backend(self._base(i), settings.serve_backend) for i in range(len(self.plan.servers))
        ]
        self.launches: dict[int, Launch] = {}
        self.errors: dict[int, str] = {}
        self.started_at: dict[int, float] = {}  # wall-clock seconds (time.time), for the record
        self.stopped_at: dict[int, float] = {}
        self.probes: dict[str, dict[str, Any]] = {}  # label -> its adapter-is-live probe
        self.warnings: dict[str, list[str]] = {}  # label -> what its probe warned

    @property
    def launchable(self) -> bool:
        """Every server has a backend here (else: `--serve auto` without vLLM/SGLang and a GPU)."""
        return all(b is not None for b in self.backends)

    def _base(self, server: int) -> ResolvedModel:
        """The weights a server loads: the base of its adapters, or its own model."""
        first = self.models[self.plan.servers[server].labels[0]]
        return first.base if first.kind in ADAPTER_KINDS and first.base is not None else first

    def server_of(self, label: str) -> int:
        return next(i for i, s in enumerate(self.plan.servers) if label in s.labels)

    def request_name(self, label: str) -> str:
        """The model name a request for `label` carries on its server."""
        model, backend = self.models[label], self.backends[self.server_of(label)]
        if model.kind == "adapter" and backend in ("vllm", "sglang"):
            return adapter_request_name(
                backend, self._base(self.server_of(label)).served_name, adapter_served_name(model)
            )
        return model.served_name

    # -- what workers get -----------------------------------------------------------------
    def record(self, label: str) -> ServedModel:
        """`label`'s server as it is known at start-up, whatever its wave: the weights, the
        backend and the sampling defaults (the cache key's and the summary identity's);
        once the server is up, with its replicas, logs and notes as well."""
        model, server = self.models[label], self.server_of(label)
        backend = self.backends[server]
        assert backend is not None
        known = ServedModel(
            label=label,
            backend=backend,
            model=model.describe(),
            fingerprint=model.weights_fingerprint,
            sampling_defaults=dict(SAMPLING_DEFAULTS[backend]),
            streams=backend != "llama-cpp",
            serves=tuple(sorted(self.plan.servers[server].labels)),
        )
        run = self.launches.get(server)
        if run is None:
            return known
        up = run.record()
        return replace(
            known,
            sampling_defaults=dict(up.sampling_defaults),
            replicas=up.replicas,
            logs=up.logs,
            server_notes=up.server_notes,
            adapter_probe=self.probes.get(label, up.adapter_probe),
            warnings=(*up.warnings, *self.warnings.get(label, ())),
        )

    def placeholder(self, label: str) -> dict[str, Any]:
        """A later wave's model as workers get it at start-up: its record and the file
        its server's address and key will arrive in (`pending`)."""
        record = replace(self.record(label), pending=str(served_file(self.folder, label)))
        return {"model_name": self.request_name(label), "served": record.as_dict()}

    def served(self, label: str) -> dict[str, Any]:
        """What the served file holds for a started server (the key included)."""
        run = self.launches[self.server_of(label)]
        return {
            "endpoints": list(run.endpoints),
            "model_name": self.request_name(label),
            "key": run.key,
            "served": self.record(label).as_dict(),
        }

    # -- what the terminal says about waves ------------------------------------------------
    def wave_of(self, server: int) -> int:
        """The wave (0-based) `server` starts in: the plan's grouping by the slots."""
        return next(i for i, wave in enumerate(self.plan.waves()) if server in wave)

    def announce(self) -> None:
        """Which wave runs, and what each later model waits for (said once, at start-up,
        after the first servers started: what is true then, a failed one's slot given on)."""
        waves = self.plan.waves()
        if len(waves) < 2:
            return
        cap = f"{self.plan.at_once} server{'s' if self.plan.at_once > 1 else ''} at a time"
        for wave, servers in enumerate(waves):
            up = [label for s in servers if s in self.launches for label in self.plan.servers[s].labels]
            if up:
                self.say(f"agenteval: sweep wave {wave + 1}/{len(waves)} running: {', '.join(up)} ({cap})")
        if not self.launches:
            self.say("agenteval: no server of the sweep is running: every one failed to start (see above)")
        for wave in range(1, len(waves)):
            ahead = [
                label
                for s in waves[wave - 1]
                if s not in self.errors
                for label in self.plan.servers[s].labels
            ]
            for server in waves[wave]:
                if server in self.launches or server in self.errors:
                    continue
                for label in self.plan.servers[server].labels:
                    self.say(
                        f"agenteval: {label} waits for wave {wave}/{len(waves)} "
                        f"({', '.join(ahead)}) to finish: its server starts in wave "
                        f"{wave + 1}/{len(waves)}, when a slot is free"
                    )

    def waiting(self, label: str) -> bool:
        """`label`'s server has neither started nor failed yet (a later wave's)."""
        server = self.server_of(label)
        return server not in self.launches and server not in self.errors

    # -- starting and stopping ------------------------------------------------------------
    def start_ready(self) -> None:
        """Start every server that may start now (a failed one frees its slot at once)."""
        while True:
            ready = self.schedule.start_next()
            if not ready:
                return
            for server, devices in ready:
                self._start(server, devices)

    def _start(self, server: int, devices: str | None) -> None:
        labels = self.plan.servers[server].labels
        backend = self.backends[server]
        assert backend is not None
        log = self.log_dir / f"server-{server}-{labels[0]}.log"
        spec, held = self._spec(server, backend, devices)
        waves, wave = self.plan.waves(), self.wave_of(server)
        if wave and self.schedule.remaining is not None:  # a later wave, once the run is under way
            self.say(f"agenteval: sweep wave {wave + 1}/{len(waves)} running: {', '.join(labels)}")
        self.say(f"agenteval: starting {backend} server {server + 1}/{len(self.plan.servers)} for "
                 f"{', '.join(labels)} on {spec.url} (log {log})")  # fmt: skip
        try:
            launched = launch(
                spec, log, timeout_s=self.settings.serve_timeout, held=held, key=new_key(), say=self.say,
                version=_version(backend),
            )  # fmt: skip
        except LaunchError as exc:
            self._failed(server, str(exc))
            return
        self.started_at[server] = time.time()
        self.launches[server] = Launch(self._base(server), [launched], labels[0])
        self.say(f"agenteval: {backend} server ready on {spec.url} in {launched.ready_s:.1f} s (log {log})")
        if not self._probe(server):
            return
        for label in labels:
            write_served(self.folder, label, self.served(label))

    def _probe(self, server: int) -> bool:
        """The adapter-is-live probe of each LoRA beside its base (as --serve runs it for one
        model): two greedy completions of a few tokens each. False when it failed (or, with
        --strict-adapter, found a LoRA answered by its base): the server is stopped and its
        models' items error with the reason."""
        run, backend = self.launches[server], self.backends[server]
        if backend not in ("vllm", "sglang"):
            return True
        for label in self.plan.servers[server].adapters:
            try:
                result, warning = probe_served_adapter(
                    run.endpoints[0], run.key, run.served_name, self.request_name(label),
                    log=run.servers[0].log_path, strict=self.settings.strict,
                )  # fmt: skip
            except LaunchError as exc:
                run.stop()
                del self.launches[server]
                self._failed(server, str(exc))
                return False
            self.probes[label] = result
            if warning:
                self.warnings.setdefault(label, []).append(warning)
                self.say(f"agenteval: WARNING: {label}: {warning}")
        return True

    def _failed(self, server: int, reason: str) -> None:
        labels = self.plan.servers[server].labels
        self.errors[server] = f"the server of {', '.join(labels)} did not start: {reason}"
        self.say(f"agenteval: {self.errors[server]}")
        self.schedule.failed(server)
        for label in labels:  # its items error with the reason; the other models go on
            write_served(self.folder, label, {"error": self.errors[server]})

    def _spec(self, server: int, backend: str, devices: str | None) -> tuple[ServerSpec, Any]:
        settings, labels = self.settings, self.plan.servers[server].labels
        held, port = free_port()
        extra = tuple(settings.serve_args)
        if backend == "llama-cpp":
            if len(labels) == 1:
                spec = llama_cpp_command(
                    self.models[labels[0]], port, n_threads=settings.llama_threads, n_ctx=settings.n_ctx,
                    extra=extra,
                )  # fmt: skip
            else:
                entries = [(self.models[label].served_name, self.models[label]) for label in labels]
                config = self.folder / f"llama-server-{server}.json"
                spec = llama_cpp_config_command(
                    entries, port, config, n_threads=settings.llama_threads, n_ctx=settings.n_ctx
                )
            return (replace(spec, env={"CUDA_VISIBLE_DEVICES": devices}) if devices else spec), held
        base = self._base(server)
        adapters = [self.models[label] for label in self.plan.servers[server].adapters]
        if backend == "vllm":
            internal, internal_port = free_port()
            internal.close()
            spec = vllm_command(
                base, port, adapters=adapters, tp=settings.serve_tp, devices=devices,
                internal_port=internal_port, extra=extra,
            )  # fmt: skip
        else:
            spec = sglang_command(
                base, port, adapters=adapters, tp=settings.serve_tp, devices=devices, extra=extra
            )
        return spec, held

    def expect(self, counts: Mapping[str, int]) -> None:
        """Each model's item count, once collection is done."""
        for server in self.schedule.expect(counts):
            self._stop(server)
        self.start_ready()

    def finished(self, label: str) -> None:
        """One item of `label` finished (its teardown was reported)."""
        for server in self.schedule.finished(label):
            self._stop(server)
        self.start_ready()

    def _stop(self, server: int) -> None:
        run = self.launches.get(server)
        if run is None:
            return
        problems = run.stop()
        self.stopped_at[server] = time.time()
        labels = ", ".join(self.plan.servers[server].labels)
        self.say(f"agenteval: stopped the server of {labels}: its items are done"
                 + (f" ({'; '.join(problems)})" if problems else ""))  # fmt: skip

    def close(self) -> list[str]:
        """Stop whatever still runs and remove the serve folder (keys and configs with it)."""
        problems = [p for run in self.launches.values() for p in run.stop()]
        shutil.rmtree(self.folder, ignore_errors=True)
        return problems
