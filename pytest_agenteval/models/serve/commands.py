"""Command lines for the servers we launch, as pure functions: what each server needs to
be loopback-only, named so we can recognise it, keyed through its environment, and free
of the checkpoint's hidden sampling defaults."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agenteval.models.serve.resolve import ResolvedModel, ResolveError

# vLLM accepts only these `--max-lora-rank` values (vllm/config/lora.py MaxLoRARanks).
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
MAX_LORAS_CAP = 8
HOST = "127.0.0.1"
# Sent with every request, so the server's own defaults never decide a sample: llama_cpp.server's
# are top_k=40, min_p=0.05, repeat_penalty=1.1; vLLM's and SGLang's come from the checkpoint.
# Known before a server starts: a later wave's model has the same cache key as the first's.
SAMPLING_DEFAULTS: dict[str, dict[str, Any]] = {
    "llama-cpp": {"min_p": 0.0, "repeat_penalty": 1.0, "top_k": 0},
    "vllm": {"top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0},
    "sglang": {"top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0},
}


# vLLM tool-call parsers by config.json model_type, so `--bfcl-style native` gets tool_calls back
TOOL_PARSERS = {
    "qwen2": "hermes",
    "qwen2_moe": "hermes",
    "qwen3": "hermes",
    "qwen3_moe": "hermes",
    "llama": "llama3_json",
    "mistral": "mistral",
}


def tool_parser(checkpoint: Path) -> str | None:
    """The parser for a checkpoint's family; None where we do not know it (then tools come
    back as raw text, which `--bfcl-style prompting` reads anyway)."""
    try:
        model_type = json.loads((checkpoint / "config.json").read_text(encoding="utf-8")).get("model_type")
    except (OSError, json.JSONDecodeError, AttributeError):
        return None
    return TOOL_PARSERS.get(str(model_type))


@dataclass(frozen=True)
class ServerSpec:
    """One server process to start: argv (no key on it), extra environment, and how to
    recognise and stop it."""

    backend: str  # "llama-cpp" | "vllm" | "sglang"
    argv: tuple[str, ...]
    port: int
    served_name: str
    key_env: str | None  # the child reads its API key from this variable; None: key-less
    env: Mapping[str, str] = field(default_factory=dict)  # added to the child's environment only
    grace_s: float = 5.0  # SIGTERM to SIGKILL
    adapters: Mapping[str, str] = field(default_factory=dict)  # served adapter name -> path
    sampling_defaults: Mapping[str, Any] = field(default_factory=dict)  # sent with every request

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    def args_hash(self) -> str:
        """What a reusable (`--serve-keep`) server must match: argv minus the port, env."""
        argv = [a for a in self.argv if a != str(self.port)]
        env = {k: v for k, v in self.env.items() if k != "VLLM_PORT"}  # a free port, chosen per launch
        payload = {"backend": self.backend, "argv": argv, "env": env, "adapters": dict(self.adapters)}
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def lora_rank_for_vllm(rank: int) -> int:
    """The smallest rank vLLM allows that holds an adapter of rank `rank`."""
    for allowed in VLLM_LORA_RANKS:
        if allowed >= rank:
            return allowed
    raise ResolveError(
        f"LoRA rank {rank} is above vLLM's largest --max-lora-rank {VLLM_LORA_RANKS[-1]}; "
        "merge the adapter into the base and pass the merged checkpoint as --model-path"
    )


def adapter_served_name(adapter: ResolvedModel) -> str:
    """`<folder>-<sha8 of the adapter weights>`: stable across paths and revisions."""
    assert adapter.path is not None
    weights = [h for n, h in sorted(adapter.files.items()) if n.startswith("adapter_model")]
    return f"{adapter.path.name}-{(weights[0] if weights else adapter.fingerprint)[:8]}"


def adapter_request_name(backend: str, base_name: str, adapter_name: str) -> str:
    """The model name a request for a LoRA served beside its base carries. SGLang 0.5.23
    picks a LoRA only from `model="base:adapter"` (python/sglang/srt/entrypoints/openai/
    serving_base.py `_parse_model_parameter`) and answers any other name with the base;
    vLLM takes the adapter's own name."""
    return f"{base_name}:{adapter_name}" if backend == "sglang" else adapter_name


def parse_gpus(text: str) -> list[str]:
    """`0-7`, `0,1,4` or `0-3,6`: device ids in order, each once."""
    devices: list[str] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise ValueError(f"--serve-gpus {text!r}: write device ids like 0-7 or 0,1,2,3")
        for device in range(int(low), int(high) + 1) if dash else [int(low)]:
            if str(device) not in devices:
                devices.append(str(device))
    if not devices:
        raise ValueError(f"--serve-gpus {text!r}: no device ids; write e.g. 0-7")
    return devices


def replica_devices(gpus: str | None, tp: int) -> list[str | None]:
    """One CUDA_VISIBLE_DEVICES value per independent replica (None: leave it as it is)."""
    if tp < 1:
        raise ValueError(f"--serve-tp must be >= 1, got {tp}")
    if not gpus:
        return [None]
    devices = parse_gpus(gpus)
    if len(devices) % tp:
        raise ValueError(
            f"--serve-gpus {gpus} has {len(devices)} devices, not a multiple of --serve-tp {tp}; "
            "give a multiple or change --serve-tp"
        )
    return [",".join(devices[i : i + tp]) for i in range(0, len(devices), tp)]


def llama_cpp_command(
    model: ResolvedModel, port: int, *, n_threads: int, n_ctx: int, extra: Sequence[str] = ()
) -> ServerSpec:
    """`python -m llama_cpp.server` on a GGUF (the CPU test bed of the launcher); a GGUF
    LoRA runs on its base gguf (`--model BASE --lora_path ADAPTER`), served under its own
    name (its fingerprint's). Prompts are read on `n_threads` too (`--n_threads_batch`,
    as the in-process backend does): llama_cpp.server's default is every core, whose threads
    spin-wait for each other when xdist workers hold the cores (measured: two 6-token
    completions 4-5 s of CPU against 1.5 s)."""
    assert model.path is not None
    weights = model.path
    if model.kind == "gguf-adapter":
        assert model.base is not None and model.base.path is not None
        weights = model.base.path
        extra = ("--lora_path", str(model.path), *extra)
    argv = (
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(weights),
        "--model_alias", model.served_name,
        "--host", HOST, "--port", str(port),
        "--n_threads", str(n_threads),
        "--n_threads_batch", str(n_threads),
        "--n_ctx", str(n_ctx),
        *extra,
    )  # fmt: skip
    defaults = dict(SAMPLING_DEFAULTS["llama-cpp"])
    return ServerSpec("llama-cpp", argv, port, model.served_name, "API_KEY", sampling_defaults=defaults)


def llama_cpp_config_command(
    models: Sequence[tuple[str, ResolvedModel]],
    port: int,
    config_path: Path,
    *,
    n_threads: int,
    n_ctx: int,
) -> ServerSpec:
    """One `python -m llama_cpp.server --config_file` serving several gguf models under their
    aliases (`(alias, model)`, the first one its ready check): a gguf LoRA as its base plus
    `lora_path`. llama_cpp.server holds one model loaded at a time and swaps on a request for
    another (docs/performance.md has the cost), so a sweep asks model by model. The file
    holds no key (the server reads API_KEY from its environment); --serve-arg does not apply."""
    entries = []
    for alias, model in models:
        assert model.path is not None
        entry: dict[str, Any] = {
            "model_alias": alias, "n_threads": n_threads, "n_threads_batch": n_threads, "n_ctx": n_ctx
        }  # fmt: skip
        if model.kind == "gguf-adapter" and model.base is not None and model.base.path is not None:
            entry.update(model=str(model.base.path), lora_path=str(model.path))
        else:
            entry["model"] = str(model.path)
        entries.append(entry)
    config_path.write_text(json.dumps({"host": HOST, "port": port, "models": entries}, indent=1), "utf-8")
    argv = (sys.executable, "-m", "llama_cpp.server", "--config_file", str(config_path))
    defaults = dict(SAMPLING_DEFAULTS["llama-cpp"])
    return ServerSpec("llama-cpp", argv, port, models[0][0], "API_KEY", sampling_defaults=defaults)


def _lora_modules(adapters: Sequence[ResolvedModel], base_name: str) -> tuple[dict[str, str], list[str]]:
    names = {adapter_served_name(a): str(a.path) for a in adapters}
    modules = [json.dumps({"name": n, "path": p, "base_model_name": base_name}) for n, p in names.items()]
    return names, modules


def vllm_command(
    model: ResolvedModel,
    port: int,
    *,
    adapters: Sequence[ResolvedModel] = (),
    tp: int = 1,
    devices: str | None = None,
    internal_port: int | None = None,
    extra: Sequence[str] = (),
) -> ServerSpec:
    """`vllm serve BASE` with every adapter beside it (static --lora-modules, so no runtime
    updating), `--generation-config vllm` so the checkpoint's generation_config.json does
    not silently change sampling, and the key in VLLM_API_KEY (never on argv)."""
    base = model.base if model.kind == "adapter" else model
    assert base is not None and base.path is not None
    argv: list[str] = [
        "vllm", "serve", str(base.path),
        "--served-model-name", model.served_name if model.kind != "adapter" else base.served_name,
        "--host", HOST, "--port", str(port),
        "--generation-config", "vllm",
        "--tensor-parallel-size", str(tp),
    ]  # fmt: skip
    if model.chat_template:
        argv += ["--chat-template", model.chat_template]
    parser = tool_parser(base.path)
    if parser is not None:
        argv += ["--enable-auto-tool-choice", "--tool-call-parser", parser]
    all_adapters = list(adapters) or ([model] if model.kind == "adapter" else [])
    names: dict[str, str] = {}
    if all_adapters:
        ranks = [a.lora_rank or 16 for a in all_adapters]
        names, modules = _lora_modules(all_adapters, base.served_name)
        argv += [
            "--enable-lora",
            "--max-lora-rank", str(lora_rank_for_vllm(max(ranks))),
            "--max-loras", str(min(len(all_adapters), MAX_LORAS_CAP)),
            "--lora-modules", *modules,
        ]  # fmt: skip
    env: dict[str, str] = {}
    if devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = devices
    if internal_port is not None:  # replicas on one host must not share vLLM's internal ports
        env["VLLM_PORT"] = str(internal_port)
    served = base.served_name if model.kind == "adapter" else model.served_name
    defaults = dict(SAMPLING_DEFAULTS["vllm"])
    return ServerSpec("vllm", (*argv, *extra), port, served, "VLLM_API_KEY", env, 30.0, names, defaults)


def sglang_command(
    model: ResolvedModel,
    port: int,
    *,
    adapters: Sequence[ResolvedModel] = (),
    tp: int = 1,
    devices: str | None = None,
    extra: Sequence[str] = (),
) -> ServerSpec:
    """`python -m sglang.launch_server`. SGLang takes its key only on argv, so it runs
    key-less on loopback rather than put a key where `ps` shows it."""
    base = model.base if model.kind == "adapter" else model
    assert base is not None and base.path is not None
    served = base.served_name
    argv: list[str] = [
        sys.executable, "-m", "sglang.launch_server",
        "--model-path", str(base.path),
        "--served-model-name", served,
        "--host", HOST, "--port", str(port),
        "--tp-size", str(tp),
    ]  # fmt: skip
    if model.chat_template:
        argv += ["--chat-template", model.chat_template]
    all_adapters = list(adapters) or ([model] if model.kind == "adapter" else [])
    names: dict[str, str] = {}
    if all_adapters:
        names = {adapter_served_name(a): str(a.path) for a in all_adapters}
        ranks = [a.lora_rank or 16 for a in all_adapters]
        argv += ["--enable-lora", "--max-lora-rank", str(max(ranks))]
        argv += ["--lora-paths", *(f"{n}={p}" for n, p in names.items())]
    env = {"CUDA_VISIBLE_DEVICES": devices} if devices is not None else {}
    defaults = dict(SAMPLING_DEFAULTS["sglang"])
    return ServerSpec("sglang", (*argv, *extra), port, served, None, env, 30.0, names, defaults)


def printable(spec: ServerSpec) -> str:
    """The command line for logs and the summary (it never holds the key)."""
    import shlex

    return " ".join(shlex.quote(a) for a in spec.argv)
