"""The run's launched servers, from options to endpoints: which server, how many replicas,
reuse of a kept one, the adapter probe, and what travels to xdist workers."""

from __future__ import annotations

import importlib.metadata
import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_agenteval.config.packages import installed
from pytest_agenteval.models.serve.commands import (
    ServerSpec,
    adapter_request_name,
    llama_cpp_command,
    replica_devices,
    sglang_command,
    vllm_command,
)
from pytest_agenteval.models.serve.launcher import (
    LaunchedServer,
    LaunchError,
    free_port,
    launch,
    list_models,
    new_key,
    stop,
)
from pytest_agenteval.models.serve.probe import probe_adapter
from pytest_agenteval.models.serve.record import ServedModel
from pytest_agenteval.models.serve.resolve import ResolvedModel

KEEP_FILE = "serve-keep.json"
BACKEND_PACKAGES = {"llama-cpp": "llama_cpp_python", "vllm": "vllm", "sglang": "sglang"}


def cuda_present() -> bool:
    return shutil.which("nvidia-smi") is not None


def pick_backend(resolved: ResolvedModel, requested: str) -> str | None:
    """The server to launch for `--serve` (`requested` from --serve-backend), or None
    where none can run here (`auto` on a machine without vLLM/SGLang and a GPU: the
    in-process transformers backend). A backend asked for by name must be installed."""
    if resolved.kind in ("gguf", "gguf-adapter"):
        if requested not in ("auto", "llama-cpp"):
            raise LaunchError(f"--serve-backend {requested} cannot serve a .gguf file; use llama-cpp or auto")
        if not installed("llama_cpp.server") or not installed("uvicorn"):
            raise LaunchError(
                "--serve on a .gguf needs llama_cpp.server: pip install 'llama-cpp-python[server]'"
            )
        return "llama-cpp"
    if requested == "llama-cpp":
        raise LaunchError(
            "--serve-backend llama-cpp serves .gguf files only; use vllm or sglang for a checkpoint"
        )
    if requested in ("vllm", "sglang"):
        if not installed(requested):
            raise LaunchError(
                f"--serve-backend {requested}: {requested} is not installed (pip install {requested})"
            )
        return requested
    if installed("vllm") and cuda_present():
        return "vllm"
    if installed("sglang") and cuda_present():
        return "sglang"
    return None


@dataclass
class Launch:
    """The servers of this run (replicas of one model) and what the summary records."""

    resolved: ResolvedModel
    servers: list[LaunchedServer]
    label: str
    probe: Mapping[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def endpoints(self) -> tuple[str, ...]:
        return tuple(s.url for s in self.servers)

    @property
    def served_name(self) -> str:
        """The base's name on the server (what the ready and ownership checks look for)."""
        return self.servers[0].spec.served_name

    @property
    def request_name(self) -> str:
        """The model name requests carry: the adapter's for an adapter run (the base is
        served beside it, and asking for the base would evaluate the base)."""
        adapters = list(self.servers[0].spec.adapters)
        if self.resolved.kind == "adapter" and adapters:
            return adapter_request_name(self.servers[0].spec.backend, self.served_name, adapters[0])
        return self.served_name

    @property
    def key(self) -> str | None:
        return self.servers[0].key

    def record(self, label: str | None = None, serves: Sequence[str] = ()) -> ServedModel:
        """The typed record of this launch (models/choice.py), for `label` (a sweep's model
        on this server) or the run's own model."""
        notes = [line for s in self.servers for line in server_notes(s.log_path)]
        return ServedModel(
            label=label or self.label,
            backend=self.servers[0].spec.backend,
            model=self.resolved.describe(),
            fingerprint=self.resolved.weights_fingerprint,  # the cache key's
            sampling_defaults=dict(self.servers[0].spec.sampling_defaults),
            streams=all(s.spec.backend != "llama-cpp" for s in self.servers),
            serves=tuple(sorted(serves)),
            replicas=tuple(s.describe() for s in self.servers),
            logs={s.url: str(s.log_path) for s in self.servers},
            server_notes=tuple(notes),
            adapter_probe=dict(self.probe) if self.probe is not None else None,
            warnings=tuple(self.warnings),
        )

    def describe(self) -> dict[str, Any]:
        return self.record().describe()

    def workerinput(self) -> dict[str, Any]:
        """What a worker needs to use the servers (the key travels over xdist's channel,
        in memory only, never to a file)."""
        return {
            "endpoints": list(self.endpoints),
            "model_name": self.request_name,
            "key": self.key,
            "served": self.record().as_dict(),
        }

    def stop(self) -> list[str]:
        """Stop what this run started (kept and reused servers stay up)."""
        problems = []
        for server in self.servers:
            if server.process is not None and not server.reused and not _is_kept(server):
                problem = stop(server)
                if problem:
                    problems.append(problem)
        return problems


# Log lines that say the server changed what our requests mean (vLLM: generation_config.json).
NOTE_MARKERS = ("sampling parameters have been overridden", "Default sampling parameters")


def server_notes(log: Path) -> list[str]:
    """The server's own word on default sampling, kept in the results."""
    try:
        with open(log, encoding="utf-8", errors="replace") as handle:
            return sorted({line.strip() for line in handle if any(m in line for m in NOTE_MARKERS)})
    except OSError:
        return []


def _is_kept(server: LaunchedServer) -> bool:
    from pytest_agenteval.models.serve.launcher import ACTIVE

    return server not in ACTIVE


def build_specs(settings: Any, resolved: ResolvedModel, backend: str) -> list[tuple[ServerSpec, Any]]:
    """One spec per replica, each with its held port socket."""
    specs = []
    devices = replica_devices(settings.serve_gpus, settings.serve_tp)
    extra = tuple(settings.serve_args)
    for replica in devices:
        held, port = free_port()
        if backend == "llama-cpp":
            spec = llama_cpp_command(
                resolved, port, n_threads=settings.llama_threads, n_ctx=settings.n_ctx, extra=extra
            )
            if replica is not None:
                spec = replace(spec, env={"CUDA_VISIBLE_DEVICES": replica})
        elif backend == "vllm":
            internal, internal_port = free_port()
            internal.close()
            spec = vllm_command(
                resolved,
                port,
                tp=settings.serve_tp,
                devices=replica,
                internal_port=internal_port,
                extra=extra,
            )
        else:
            spec = sglang_command(resolved, port, tp=settings.serve_tp, devices=replica, extra=extra)
        specs.append((spec, held))
    return specs


def start(
    settings: Any,
    resolved: ResolvedModel,
    backend: str,
    log_dir: Path,
    state_dir: Path,
    say: Callable[[str], None],
) -> Launch:
    """Launch (or, with --serve-keep, reuse) every replica, one after another."""
    specs = build_specs(settings, resolved, backend)
    version = _version(backend)
    gguf = resolved.kind in ("gguf", "gguf-adapter")
    label = resolved.path.stem if gguf and resolved.path else Path(resolved.source).name
    servers: list[LaunchedServer] = []
    reused = _reuse(specs, state_dir, version) if settings.serve_keep else None
    if reused is not None:
        for _, held in specs:
            held.close()
        servers = reused
        urls = ", ".join(s.url for s in servers)
        say(f"agenteval: reusing the kept {backend} server(s) {urls} (--serve-keep)")
    else:
        key = new_key()
        try:
            for index, (spec, held) in enumerate(specs):
                log = log_dir / f"server-{spec.served_name}-{index}.log"
                say(
                    f"agenteval: starting {backend} server {index + 1}/{len(specs)} on {spec.url} (log {log})"
                )
                servers.append(
                    launch(
                        spec,
                        log,
                        timeout_s=settings.serve_timeout,
                        keep=settings.serve_keep,
                        held=held,
                        key=key,
                        say=say,
                        version=version,
                    )
                )
        except BaseException:
            for server in servers:
                stop(server)
            for _, held in specs:
                held.close()
            raise
        if settings.serve_keep:
            _write_state(state_dir, servers)
    run = Launch(resolved, servers, label)
    _probe_adapters(run, settings, say)
    return run


def _probe_adapters(run: Launch, settings: Any, say: Callable[[str], None]) -> None:
    backend = run.servers[0].spec.backend
    for name in run.servers[0].spec.adapters:
        try:
            asked = adapter_request_name(backend, run.served_name, name)
            result, warning = probe_served_adapter(
                run.endpoints[0],
                run.key,
                run.served_name,
                asked,
                log=run.servers[0].log_path,
                strict=settings.strict,
            )
        except LaunchError:
            run.stop()
            raise
        run.probe = result
        if warning:
            run.warnings.append(warning)
            say(f"agenteval: WARNING: {warning}")


def probe_served_adapter(
    url: str, key: str | None, base: str, adapter: str, *, log: Path, strict: bool
) -> tuple[dict[str, Any], str | None]:
    """The adapter-is-live probe of `adapter` (its request name) beside `base` on a running
    server: (the recorded probe, the warning when its logprobs are the base's). LaunchError
    when the probe fails, or with `strict` (--strict-adapter) when it is not live."""
    try:
        result = probe_adapter(url, key, base, adapter)
    except (OSError, KeyError, ValueError, TypeError) as exc:  # Unreachable is an OSError
        raise LaunchError(
            f"the adapter-is-live probe of {adapter} failed ({type(exc).__name__}: {exc}); "
            f"see the server log {log}"
        ) from None
    if result["live"]:
        return result, None
    line = (
        f"adapter {adapter} gives the same greedy logprobs as its base {base}: "
        "it is not applied or is a no-op (step 0?); the numbers will be the base model's"
    )
    if strict:
        raise LaunchError(f"{line} (--strict-adapter)")
    return result, line


def _version(backend: str) -> str | None:
    try:
        return importlib.metadata.version(BACKEND_PACKAGES[backend])
    except importlib.metadata.PackageNotFoundError:
        return None


# -- --serve-keep state -------------------------------------------------------------------
def _state_entry(server: LaunchedServer) -> dict[str, Any]:
    return {
        "pid": server.pid,
        "port": server.spec.port,
        "served_name": server.spec.served_name,
        "args_hash": server.spec.args_hash(),
        "version": server.version,
        "log": str(server.log_path),
    }


def _write_state(state_dir: Path, servers: list[LaunchedServer]) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / KEEP_FILE).write_text(
        json.dumps([_state_entry(s) for s in servers], indent=1), encoding="utf-8"
    )


def read_state(state_dir: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads((state_dir / KEEP_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return []
    return data if isinstance(data, list) else []


def _reuse(
    specs: list[tuple[ServerSpec, Any]], state_dir: Path, version: str | None
) -> list[LaunchedServer] | None:
    """The kept servers when they match these specs and answer with our name; else stop
    whatever is recorded (a different model or arguments) and return None."""
    state = read_state(state_dir)
    if not state:
        return None
    matches = len(state) == len(specs) and all(
        e.get("args_hash") == spec.args_hash()
        and e.get("served_name") == spec.served_name
        and e.get("version") == version
        for e, (spec, _) in zip(state, specs, strict=True)
    )
    if not matches:
        stop_kept(state_dir)
        return None
    servers = []
    for entry, (spec, _) in zip(state, specs, strict=True):
        kept_spec = replace(spec, port=int(entry["port"]))
        servers.append(
            LaunchedServer(
                kept_spec, Path(entry["log"]), None, int(entry["pid"]), None, reused=True, version=version
            )
        )
    if all(is_guard(s.pid) and spec_lists(s) for s in servers):
        return servers
    stop_kept(state_dir)
    return None


def spec_lists(server: LaunchedServer) -> bool:
    status, models = list_models(server.url, None)
    return status == 200 and server.spec.served_name in models


def is_guard(pid: int) -> bool:
    """The pid is (still) one of our group leaders, not an unrelated process that got a
    recycled pid: only then may a stale state file lead to a kill."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"pytest_agenteval.models.serve._guard" in cmdline


def stop_kept(state_dir: Path) -> list[str]:
    """Stop the servers a --serve-keep run left up, and forget them."""
    problems = []
    for entry in read_state(state_dir):
        pid = int(entry.get("pid", 0))
        if pid > 0 and is_guard(pid):
            dummy = ServerSpec("kept", (), int(entry.get("port", 0)), str(entry.get("served_name")), None)
            problem = stop(LaunchedServer(dummy, Path(entry.get("log", "")), None, pid))
            if problem:
                problems.append(problem)
    (state_dir / KEEP_FILE).unlink(missing_ok=True)
    return problems
