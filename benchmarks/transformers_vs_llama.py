"""Generation speed of the in-process transformers backend against llama.cpp on the
same SmolLM2-135M weights, prompts, seeds and sampling parameters, in one run.

    python benchmarks/transformers_vs_llama.py [--checkpoint DIR] [--val-n 4] [--max-tokens 96]

(a) llama.cpp: the embedded Q4_1 gguf, the N samples of each prompt one after another
    (`LlamaSampler`, as the plugin runs it);
(b) transformers, batched: the same model dequantized to an fp32 checkpoint, the N
    samples of a prompt as one batch of N rows (`TransformersSampler`, as the plugin runs it);
(c) transformers, one row at a time (batch_rows=1), to show what the batching buys.
Both use --llama-threads threads. Tokens/s = completion tokens / generation wall seconds
(model loads excluded; each backend is warmed up on one short prompt first). The ratios
are what to read: absolute rates move with machine load."""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_agenteval.api.records import sample_seed  # noqa: E402
from pytest_agenteval.models import LlamaSampler, SamplingParams, embedded_model_path  # noqa: E402
from pytest_agenteval.models.backends.checkpoint import checkpoint_from_gguf  # noqa: E402
from pytest_agenteval.models.backends.transformers import TransformersSampler  # noqa: E402
from pytest_agenteval.tasks.aime25 import text_only_messages  # noqa: E402

PROBLEMS = [  # our own, AIME-style
    "Find the remainder when 3^{2025} + 17 is divided by 1000.",
    "How many ordered pairs (x, y) of integers with 0 <= x, y <= 100 satisfy 12x^2 - xy - 6y^2 = 0?",
    "A triangle has sides 13, 14 and 15. Find the product of its inradius and circumradius.",
]


def _params(args: argparse.Namespace, problem: int, j: int) -> SamplingParams:
    return SamplingParams(1.0, 0.7, -1, args.max_tokens, sample_seed(args.seed, problem, j))


async def _run(
    sampler: object, prompts: list[list[int]], args: argparse.Namespace, batched: bool
) -> tuple[int, float]:
    tokens = 0
    started = time.perf_counter()
    for index, prompt in enumerate(prompts):
        calls = [sampler.complete_tokens(prompt, _params(args, index, j)) for j in range(args.val_n)]  # type: ignore[attr-defined]
        if batched:
            done = await asyncio.gather(*calls)
        else:
            done = [await call for call in calls]
        tokens += sum(c.completion_tokens for c in done)
    return tokens, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", help="SmolLM2 saved as a checkpoint (default: converted now)")
    parser.add_argument("--val-n", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    workdir = tempfile.TemporaryDirectory(prefix="agenteval-hf-bench-")
    checkpoint = (
        Path(args.checkpoint)
        if args.checkpoint
        else checkpoint_from_gguf(embedded_model_path(), Path(workdir.name))
    )
    llama = LlamaSampler(embedded_model_path(), embedded=True, n_threads=args.threads)
    hf = TransformersSampler(checkpoint, n_threads=args.threads, batch_rows=args.val_n)
    prompts = [llama.chat_tokenizer().render(text_only_messages(p), None, True) for p in PROBLEMS]
    warm = SamplingParams(0.0, 1.0, -1, 4, 0)
    asyncio.run(llama.complete_tokens(prompts[0], warm))
    asyncio.run(hf.complete_tokens(prompts[0], warm))
    rows = [("llama.cpp (Q4_1 gguf)", *asyncio.run(_run(llama, prompts, args, False)))]
    rows.append(("transformers, N rows", *asyncio.run(_run(hf, prompts, args, True))))
    hf.batch_rows = 1
    rows.append(("transformers, 1 row", *asyncio.run(_run(hf, prompts, args, False))))
    base = rows[0][1] / rows[0][2]
    print(f"{len(PROBLEMS)} prompts x N={args.val_n}, max {args.max_tokens} tokens, {args.threads} thread(s)")
    print(f"{'step':<24}{'tokens':>8}{'wall s':>9}{'tok/s':>8}{'vs llama.cpp':>14}")
    for name, tokens, wall in rows:
        print(f"{name:<24}{tokens:>8}{wall:>9.2f}{tokens / wall:>8.1f}{tokens / wall / base:>14.2f}")


if __name__ == "__main__":
    main()
