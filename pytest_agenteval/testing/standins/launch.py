"""`vllm serve` and `python -m sglang.launch_server` as the stand-ins run them: parse the
command line with the pinned flag list, print start-up lines the way the real server does
(the launcher reads its log), claim the visible devices, wait the configured start-up delay
or die of the configured fatal error, then serve until SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_agenteval.testing._config import ServerConfig
from pytest_agenteval.testing.standins.argv import SGLANG_VERSION, VLLM_VERSION, parse_sglang, parse_vllm
from pytest_agenteval.testing.standins.devices import DeviceError, claim, read_state
from pytest_agenteval.testing.standins.server import Served, StandinCore

DELAY_ENV = "AGENTEVAL_STANDIN_DELAY_S"
FATAL_ENV = "AGENTEVAL_STANDIN_FATAL"
SCRIPT_ENV = "AGENTEVAL_STANDIN_SCRIPT"
ANSWER_ENV = "AGENTEVAL_STANDIN_ANSWER"
GGUF_ENV = "AGENTEVAL_STANDIN_GGUF"
FATALS = ("oom", "oom-hang")
DEFAULT_CONTEXT = 32768
# vLLM's reasoning parsers map onto the mock server's two behaviours (_think.py)
REASONING = {"qwen3": "qwen3", "deepseek_r1": "deepseek_r1", "deepseek-r1": "deepseek_r1"}
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {device} has a total "
    "capacity of 79.18 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has "
    "78.11 GiB memory in use. Of the allocated memory 76.52 GiB is allocated by PyTorch, and 1.02 GiB "
    "is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
    "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)


def say(backend: str, text: str, level: str = "INFO") -> None:
    """One log line, as vLLM (`(APIServer pid=N) INFO MM-DD hh:mm:ss [file] ...`) or SGLang
    (`[YYYY-MM-DD hh:mm:ss] ...`) writes it."""
    now = time.localtime()
    if backend == "vllm":
        stamp = time.strftime("%m-%d %H:%M:%S", now)
        line = f"(APIServer pid={os.getpid()}) {level} {stamp} [api_server.py] {text}"
    else:
        line = f"[{time.strftime('%Y-%m-%d %H:%M:%S', now)}] {text}"
    print(line, flush=True)


def _setting(folder: Path, env_name: str, key: str, default: Any = None) -> Any:
    value = os.environ.get(env_name)
    return value if value not in (None, "") else read_state(folder).get(key, default)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def context_length(model: Path, given: int | None) -> int:
    if given:
        return int(given)
    value = _read_json(model / "config.json").get("max_position_embeddings")
    return int(value) if isinstance(value, int) and value > 0 else DEFAULT_CONTEXT


def vllm_defaults(model: Path, source: str | None, override: str | None) -> dict[str, Any]:
    """The sampling defaults vLLM 0.34.0 applies (vllm/config/model.py get_diff_sampling_param):
    `--generation-config auto` (the default) the model's generation_config.json, `vllm` none,
    a folder that folder's file; then `--override-generation-config`."""
    src = source or "auto"
    folder = model if src == "auto" else Path(src)
    config = {} if src == "vllm" else _read_json(folder / "generation_config.json")
    config.update(json.loads(override) if override else {})
    names = ("repetition_penalty", "presence_penalty", "frequency_penalty", "temperature", "top_k", "top_p",
             "min_p", "max_new_tokens", "skip_special_tokens")  # fmt: skip
    diff = {p: config[p] for p in names if config.get(p) is not None}
    if "max_new_tokens" in diff:
        diff["max_tokens"] = diff.pop("max_new_tokens")
    if diff and src != "vllm":
        where = "the model's `generation_config.json`" if src == "auto" else src
        say(
            "vllm",
            f"Default vLLM sampling parameters have been overridden by {where}: `{diff}`. If this is "
            "not intended, please relaunch vLLM instance with `--generation-config vllm`.",
            "WARNING",
        )
    return diff


def sglang_defaults(model: Path, source: str | None) -> dict[str, Any]:
    """SGLang 0.5.23 `--sampling-defaults model` (its default): generation_config.json's
    (python/sglang/srt/configs/model_config.py get_default_sampling_params)."""
    if (source or "model") != "model":
        return {}
    config = _read_json(model / "generation_config.json")
    names = ("repetition_penalty", "temperature", "top_k", "top_p", "min_p")
    diff = {p: config[p] for p in names if config.get(p) is not None}
    if diff:
        say("sglang", f"Using default chat sampling params from model generation config: {diff}")
    return diff


def responder_settings(folder: Path) -> dict[str, Any]:
    """ServerConfig fields for the answers: llama.cpp on a gguf, a scripted responder
    (`module:attr`) or an answer template, from the environment, else from standin.json."""
    gguf = _setting(folder, GGUF_ENV, "gguf")
    if gguf:
        from pytest_agenteval.testing.standins.responders import LlamaResponder

        return {"script": LlamaResponder(str(gguf))}
    script = _setting(folder, SCRIPT_ENV, "script")
    if script:
        module, _, attr = str(script).partition(":")
        return {"script": getattr(importlib.import_module(module), attr)}
    answer = _setting(folder, ANSWER_ENV, "answer")
    return {"answer": str(answer)} if answer else {}


def lora_modules(values: list[str] | None, base: str) -> tuple[dict[str, str], dict[str, str]]:
    """vLLM's `--lora-modules`: `name=path` or JSON `{"name", "path", "base_model_name"}`."""
    paths, parents = {}, {}
    for item in values or []:
        if "=" in item and "," not in item:
            name, path = item.split("=", 1)
            paths[name], parents[name] = path, base
            continue
        module = json.loads(item)
        paths[module["name"]] = module["path"]
        parents[module["name"]] = module.get("base_model_name") or base
    return paths, parents


def sglang_loras(values: list[str] | None) -> dict[str, str]:
    """SGLang's `--lora-paths`: `name=path`, a path (named by itself) or JSON."""
    paths = {}
    for item in values or []:
        if item.startswith("{"):
            module = json.loads(item)
            paths[module["lora_name"]] = module["lora_path"]
        elif "=" in item:
            name, path = item.split("=", 1)
            paths[name] = path
        else:
            paths[item] = item
    return paths


def host_of(host: str | None) -> str:
    if host in (None, "", "0.0.0.0", "::"):
        return "127.0.0.1"  # a stand-in answers on loopback only
    return host


def start_up(backend: str, folder: Path, world_size: int) -> list[Any]:
    """Claim the devices, then the fatal error or the delay; return the held locks."""
    fatal = _setting(folder, FATAL_ENV, "fatal")
    try:
        devices, held = claim(folder, world_size, os.environ)
    except DeviceError as exc:
        say(backend, "EngineCore failed to start.", "ERROR")
        print("Traceback (most recent call last):", flush=True)
        print(str(exc), flush=True)
        sys.exit(1)
    say(backend, f"stand-in: holding GPU(s) {','.join(map(str, devices))}")
    if fatal:
        if fatal not in FATALS:
            say(backend, f"stand-in: unknown {FATAL_ENV}={fatal!r}; use one of {', '.join(FATALS)}", "ERROR")
            sys.exit(2)
        say(backend, "EngineCore failed to start.", "ERROR")
        print("Traceback (most recent call last):", flush=True)
        print(OOM.format(device=devices[0]), flush=True)
        if fatal == "oom-hang":  # an engine that hangs after its error: the launcher reads the log
            while True:  # until SIGTERM (its default action ends the process)
                time.sleep(3600)
        sys.exit(1)
    delay = float(_setting(folder, DELAY_ENV, "delay_s", 0.0) or 0.0)
    if delay > 0:
        say(backend, f"Loading weights took {delay:.2f} seconds")
        time.sleep(delay)
    return held


async def serve(backend: str, config: ServerConfig, served: Served) -> None:
    core = StandinCore(config, served)
    await core.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    say(backend, f"Starting {'vLLM' if backend == 'vllm' else 'SGLang'} API server on {core.url[:-3]}")
    print(f"INFO:     Started server process [{os.getpid()}]", flush=True)
    print("INFO:     Application startup complete.", flush=True)
    print(f"INFO:     Uvicorn running on {core.url[:-3]} (Press CTRL+C to quit)", flush=True)
    await stop.wait()
    print("INFO:     Shutting down", flush=True)
    await core.stop()


def _reasoning(name: str | None, backend: str) -> dict[str, Any]:
    if not name:
        return {}
    field = "reasoning" if backend == "vllm" else "reasoning_content"  # vLLM 0.34 renamed it
    return {"reasoning_parser": REASONING.get(name, "deepseek_r1"), "reasoning_field": field}


def vllm_main(folder: Path, argv: list[str], env: Mapping[str, str] = os.environ) -> int:
    args = parse_vllm(argv)
    if args.subparser != "serve":
        print(f"vllm {args.subparser}: not part of the stand-in (only `vllm serve` runs)", file=sys.stderr)
        return 2
    model = args.model_tag or args.model
    if not model:
        print("vllm serve: error: the model tag is required (vllm serve MODEL)", file=sys.stderr)
        return 2
    say("vllm", f"vLLM API server version {VLLM_VERSION} (pytest-agenteval stand-in)")
    say("vllm", f"args: {' '.join(argv)}")
    path = Path(model)
    names = tuple(args.served_model_name or [model])
    world = int(args.tensor_parallel_size or 1) * int(args.pipeline_parallel_size or 1)
    held = start_up("vllm", folder, world)
    defaults = vllm_defaults(path, args.generation_config, args.override_generation_config)
    loras, parents = lora_modules(args.lora_modules, names[0])
    key = (args.api_key or [None])[0] or env.get("VLLM_API_KEY") or None
    served = Served("vllm", names, model, str(path.resolve()), context_length(path, args.max_model_len),
                    loras, parents, defaults, VLLM_VERSION)  # fmt: skip
    config = ServerConfig(
        host=host_of(args.host),
        port=int(args.port or 8000),
        model=names[0],
        api_key=key,
        tokenize="vllm",
        **_reasoning(args.reasoning_parser, "vllm"),
        **responder_settings(folder),
    )
    asyncio.run(serve("vllm", config, served))
    del held
    return 0


def sglang_main(folder: Path, argv: list[str]) -> int:
    args = parse_sglang(argv)
    say("sglang", f"server_args: {' '.join(argv)} (SGLang {SGLANG_VERSION}, pytest-agenteval stand-in)")
    path = Path(args.model_path)
    name = args.served_model_name or args.model_path
    world = int(args.tp_size or 1) * int(args.pp_size or 1)
    held = start_up("sglang", folder, world)
    defaults = sglang_defaults(path, args.sampling_defaults)
    loras = sglang_loras(args.lora_paths)
    served = Served("sglang", (name,), name, str(path.resolve()), context_length(path, args.context_length),
                    loras, dict.fromkeys(loras, name), defaults, SGLANG_VERSION)  # fmt: skip
    config = ServerConfig(
        host=host_of(args.host),
        port=int(args.port or 30000),
        model=name,
        api_key=args.api_key or None,
        tokenize="vllm",
        **_reasoning(args.reasoning_parser, "sglang"),
        **responder_settings(folder),
    )
    asyncio.run(serve("sglang", config, served))
    del held
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m pytest_agenteval.testing.standins.launch {vllm|sglang} FOLDER ARGS...`: what
    the files `install` writes call."""
    parser = argparse.ArgumentParser(prog="python -m pytest_agenteval.testing.standins.launch")
    parser.add_argument("backend", choices=("vllm", "sglang"))
    parser.add_argument("folder", type=Path)
    parser.add_argument("args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(argv)
    if ns.backend == "vllm":
        return vllm_main(ns.folder, ns.args)
    return sglang_main(ns.folder, ns.args)


if __name__ == "__main__":
    sys.exit(main())
