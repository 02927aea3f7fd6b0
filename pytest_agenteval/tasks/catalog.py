"""`pytest-agenteval list`: what is installed, offline and without a dataset: each shipped
suite (its version, size, categories or levels, markers, default N and the command that
runs it), the presets (what each sets, the published numbers and their sources) and the
backends (the option that picks each, and whether it is installed here). Everything comes
from the suites' own metadata (`api.Suite`: `title`, `known_size()`, `groups`...), the
preset table and the registered markers; `--json` gives the same as data."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Mapping
from typing import Any

from pytest_agenteval.config.packages import installed
from pytest_agenteval.config.presets import PRESETS
from pytest_agenteval.config.settings import Settings
from pytest_agenteval.config.table import OPTIONS
from pytest_agenteval.tasks.markers import MARKERS
from pytest_agenteval.tasks.registry import BUILTIN_SUITES

# (option, backend, the module it needs, the extra that installs it)
BACKENDS: tuple[tuple[str, str, str | None, str], ...] = (
    (
        "(none)",
        "the embedded SmolLM2-135M-Instruct, in-process via llama-cpp-python",
        "llama_cpp",
        "embedded",
    ),
    ("--model-path model.gguf", "any GGUF file, in-process", "llama_cpp", "embedded"),
    ("--endpoint URL", "any OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama, OpenAI)", None, ""),
    ("--model-path CKPT --serve", "one vLLM (else SGLang) server launched for the run, on GPUs", "vllm", ""),
    (
        "--model-path model.gguf --serve",
        "llama.cpp's server launched for the run, on the CPU",
        "llama_cpp",
        "server",
    ),
    (
        "--model-path CKPT_DIR",
        "in-process transformers (a checkpoint or LoRA adapter)",
        "transformers",
        "transformers",
    ),
    ("--model-path trio://...", "PyTRIO sampler checkpoints, through its SDK", "pytrio", "trio"),
    ("--model-path tinker://...", "Tinker sampler checkpoints, through its SDK", "tinker", "tinker"),
    ("--model-path replay:RESULTS.jsonl", "no model: re-score recorded generations", None, ""),
)
# The marker descriptions name their suite (tasks/markers.py)
_MARKER_OWNER = {"aime25": "aime", "bfcl": "bfcl", "gaia": "gaia", "datagen": "datagen"}


def default_settings() -> Settings:
    return Settings(**{o.dest: o.default for o in OPTIONS}, explicit=frozenset())


def _markers(name: str, groups: tuple[str, ...]) -> list[str]:
    word = _MARKER_OWNER.get(name, name)
    owned = [m for m, about in MARKERS.items() if word in about.lower() or m == name]
    return [name, *sorted((set(owned) | set(groups)) - {name})]


def suites() -> list[dict[str, Any]]:
    settings = default_settings()
    found = []
    for name in BUILTIN_SUITES:
        module, _, attribute = BUILTIN_SUITES[name].partition(":")
        suite = getattr(importlib.import_module(module), attribute)()
        size = suite.known_size()
        command = f"pytest --pyargs pytest_agenteval.suites.{name}"
        found.append(
            {
                "name": name,
                "title": suite.title,
                "version": suite.version,
                "size": size,
                "size_source": suite.size_from if size is not None else suite.size_unknown,
                "size_notes": suite.size_notes() if size is not None else [],
                "group_kind": suite.group_kind,
                "groups": list(suite.groups),
                "markers": _markers(name, suite.groups),
                "default_n": suite.samples(settings),
                "command": f"{command} {suite.command_args}".strip(),
            }
        )
    return found


def presets() -> list[dict[str, Any]]:
    return [
        {
            "name": p.name,
            "description": p.description,
            "sets": dict(p.values),
            "published": [
                {
                    "model": pub.model,
                    "suite": pub.suite,
                    "metric": pub.metric,
                    "value": pub.value,
                    "samples": pub.samples,
                    "source": pub.source,
                }
                for pub in p.published
            ],
        }
        for p in PRESETS
    ]


def backends() -> list[dict[str, Any]]:
    return [
        {
            "option": option,
            "backend": about,
            "installed": installed(module),
            "install": f"pip install 'pytest-agenteval[{extra}]'" if extra else "",
        }
        for option, about, module, extra in BACKENDS
    ]


def catalog() -> dict[str, Any]:
    return {"suites": suites(), "presets": presets(), "backends": backends()}


def _value(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str) else str(value)


def render(data: Mapping[str, Any]) -> str:
    lines = ["Suites (run each by name from any folder):", ""]
    for s in data["suites"]:
        size = f"{s['size']} ({s['size_source']})" if s["size"] is not None else s["size_source"]
        lines += [
            f"  {s['name']}  (version {s['version']})  {s['title']}",
            f"    size        {size}",
            *(f"    counted     {note}" for note in s["size_notes"]),
            *([f"    {s['group_kind']:<11} {', '.join(s['groups'])}"] if s["groups"] else []),
            f"    markers     {', '.join(s['markers'])}",
            f"    default N   {s['default_n']}",
            f"    run         {s['command']}",
            "",
        ]
    lines += ["Presets (--agenteval-preset NAME):", ""]
    for p in data["presets"]:
        sets = ", ".join(f"{k}={_value(v)}" for k, v in p["sets"].items()) or "nothing (today's defaults)"
        lines += [f"  {p['name']}: {p['description']}", f"    sets        {sets}"]
        for pub in p["published"]:
            n = f", N={pub['samples']}" if pub["samples"] else ""
            lines.append(
                f"    published   {pub['model']}: {pub['suite']}.{pub['metric']} {pub['value']:.3f}{n} "
                f"({pub['source']})"
            )
        lines.append("")
    lines += ["Backends:", ""]
    for b in data["backends"]:
        state = "installed" if b["installed"] else f"not installed: {b['install'] or 'see docs/models.md'}"
        lines.append(f"  {b['option']:<36} {b['backend']} [{state}]")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="pytest-agenteval list",
        description="The shipped suites, the presets and the backends; offline, no dataset needed.",
    )
    parser.add_argument("--json", action="store_true", help="the same as one JSON object")
    args = parser.parse_args(argv)
    data = catalog()
    try:
        print(json.dumps(data, indent=2) if args.json else render(data), flush=True)
    except BrokenPipeError:  # `pytest-agenteval list | head`: the reader has what it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing left to flush at exit: no second error
    return 0
