"""Tokens per second of the embedded model through the plugin vs raw llama-cpp-python,
measured in one run on the same prompts, seeds and sampling parameters.

    python benchmarks/embedded_throughput.py --dataset-path ../shared/data/aime25/aime25.jsonl

(a) raw: one `Llama` generates every sample in a loop, with the plugin's thread settings
    (1 thread for generation and for prompt processing; llama-cpp-python's own default
    would give prompt processing every core);
(b) plugin, -n 0: `pytest suites/aime25 ...` in a subprocess, the same samples;
(c) plugin, -n 2: two workers, one model each, on this machine's cores.
Tokens/s = completion tokens / wall seconds of the whole step (start-up included for
(b) and (c), whose generation-only rate is also shown from the records' latencies)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_agenteval.api.records import sample_seed  # noqa: E402
from pytest_agenteval.models import embedded_model_path  # noqa: E402
from pytest_agenteval.tasks.aime25 import text_only_messages  # noqa: E402


def raw(problems: list[dict], samples: int, max_tokens: int, seed: int) -> tuple[int, float]:
    from llama_cpp import Llama

    started = time.perf_counter()
    llm = Llama(
        model_path=str(embedded_model_path()), n_ctx=8192, n_threads=1, n_threads_batch=1, verbose=False
    )
    tokens = 0
    for problem in problems:
        for j in range(samples):
            response = llm.create_chat_completion(
                messages=text_only_messages(problem["problem"].strip()),
                temperature=1.0,
                top_p=0.7,
                top_k=0,
                max_tokens=max_tokens,
                seed=sample_seed(seed, problem["id"], j),
                repeat_penalty=1.0,
                stop=["<|im_end|>", "<|endoftext|>"],
            )
            tokens += response["usage"]["completion_tokens"]
    return tokens, time.perf_counter() - started


def plugin(args: argparse.Namespace, workers: int) -> tuple[int, float, float]:
    out = Path(args.workdir) / f"results-{workers}.jsonl"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "suites/aime25",
        "-q",
        "-p",
        "no:cacheprovider",
        f"--dataset-path={args.dataset_path}",
        f"--limit={args.limit}",
        f"--val-n={args.val_n}",
        f"--max-tokens={args.max_tokens}",
        f"--seed={args.seed}",
        f"--agenteval-out={out}",
        "--agenteval-no-cache",
        "-n",
        str(workers),
    ]
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - started
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    generations = [g for line in lines if line["type"] == "problem" for g in line["generations"]]
    tokens = sum(g["completion_tokens"] for g in generations)
    return tokens, wall, sum(g["latency_s"] for g in generations)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset-path", required=True)
    parser.add_argument("--limit", type=int, default=3)
    parser.add_argument("--val-n", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    workdir = tempfile.TemporaryDirectory(prefix="agenteval-bench-")
    args.workdir = workdir.name
    rows = [json.loads(line) for line in Path(args.dataset_path).read_text().splitlines() if line.strip()]
    problems = rows[: args.limit]
    raw_tokens, raw_wall = raw(problems, args.val_n, args.max_tokens, args.seed)
    print(f"{'step':<22}{'tokens':>8}{'wall s':>9}{'tok/s':>8}{'gen-only tok/s':>16}{'vs raw':>8}")
    raw_rate = raw_tokens / raw_wall
    print(f"{'raw llama-cpp-python':<22}{raw_tokens:>8}{raw_wall:>9.2f}{raw_rate:>8.1f}{'':>16}{1.0:>8.2f}")
    for workers in (0, 2):
        tokens, wall, generating = plugin(args, workers)
        rate = tokens / wall
        print(
            f"{f'plugin -n {workers}':<22}{tokens:>8}{wall:>9.2f}{rate:>8.1f}"
            f"{tokens / generating if workers == 0 else tokens / (generating / 2):>16.1f}"
            f"{rate / (raw_tokens / raw_wall):>8.2f}"
        )


if __name__ == "__main__":
    main()
