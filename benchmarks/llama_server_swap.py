"""What a llama.cpp server with several models costs when requests interleave them.

    python benchmarks/llama_server_swap.py --reps 8

One `python -m llama_cpp.server --config_file` (as a sweep launches it) serves the embedded
SmolLM2 135M gguf and a seeded gguf LoRA on it. llama_cpp.server keeps one model loaded and
swaps on a request for the other, so the ratio of a request's median time when the models
alternate to its median when one model repeats is the price of interleaving; the sweep
orders items model by model so swaps are rare. Same server, same run, greedy, 8 tokens."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_agenteval.models.backends.llama import embedded_model_path  # noqa: E402
from pytest_agenteval.models.serve.commands import llama_cpp_config_command  # noqa: E402
from pytest_agenteval.models.serve.launcher import free_port, launch, new_key, stop  # noqa: E402
from pytest_agenteval.models.serve.resolve import resolve_model_path  # noqa: E402
from pytest_agenteval.testing.models import make_gguf_lora  # noqa: E402


def ask(url: str, key: str, model: str) -> float:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Say hi"}],
        "max_tokens": 8,
        "temperature": 0,
    }
    request = urllib.request.Request(
        f"{url}/chat/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
    )
    started = time.perf_counter()
    with urllib.request.urlopen(request) as response:
        response.read()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=8)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="agenteval-swap-"))
    base_path = embedded_model_path()
    base = resolve_model_path(str(base_path))
    lora = resolve_model_path(
        str(make_gguf_lora(folder / "lora.gguf", base=base_path)), base_model=str(base_path)
    )
    held, port = free_port()
    spec = llama_cpp_config_command(
        [("base", base), ("lora", lora)], port, folder / "server.json", n_threads=1, n_ctx=512
    )
    key = new_key()
    server = launch(spec, folder / "server.log", timeout_s=120, held=held, key=key)
    try:
        ask(server.url, key, "base")  # warm
        same = [ask(server.url, key, "base") for _ in range(args.reps)]
        alternating = [ask(server.url, key, name) for _ in range(args.reps) for name in ("lora", "base")]
    finally:
        stop(server)
    one, two = statistics.median(same), statistics.median(alternating)
    print(f"one model repeated:   median {one:.3f} s a request ({args.reps} requests)")
    print(f"models alternating:   median {two:.3f} s a request ({2 * args.reps} requests, each a swap)")
    print(f"swap cost: {two - one:.3f} s a request; alternating/repeated = {two / one:.1f}x")


if __name__ == "__main__":
    main()
