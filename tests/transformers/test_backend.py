"""The transformers backend in-process, against llama.cpp on the same SmolLM2 weights:
the same prompt ids for the AIME prompts, how far greedy generations agree, per-row
seeds that do not depend on the batch, and the adapter-is-live probe."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.models import LlamaSampler, SamplingParams, embedded_model_path
from pytest_agenteval.models.backends.checkpoint import probe_adapter
from pytest_agenteval.models.backends.transformers import TransformersSampler
from pytest_agenteval.models.serve.probe import adapter_is_live
from pytest_agenteval.tasks.aime25._conversation import TOOLS
from pytest_agenteval.tasks.aime25._protocol import initial_messages
from pytest_agenteval.tasks.aime25.suite import text_only_messages
from tests.transformers import skip_without_backend

skip_without_backend()  # the imports above need none of the backend's packages

# Our own problems: digits, powers, braces, inequalities and a long number, since the
# gguf's `smollm` pre-tokenizer is mapped to GPT-2's regex by transformers.
PROBLEMS = [
    "What is 30 + 40?",
    "Find the remainder when 3^{2025} + 17 is divided by 1000.",
    "Let $x, y$ be integers with 0 <= x, y <= 100 and 12x^2 - xy - 6y^2 = 0. How many pairs are there?",
    "Compute 123456789 * 987654321 and give the sum of its digits.",
]
OPEN = [{"role": "user", "content": "Write one sentence about any animal you like."}]
GREEDY = SamplingParams(temperature=0.0, top_p=1.0, top_k=-1, max_tokens=48, seed=0)


@pytest.fixture(scope="module")
def llama() -> LlamaSampler:
    return LlamaSampler(embedded_model_path(), embedded=True, n_threads=1)


@pytest.fixture(scope="module")
def hf(hf_checkpoint: Path) -> TransformersSampler:
    return TransformersSampler(hf_checkpoint, n_threads=1, batch_rows=4)


@pytest.fixture(scope="module")
def greedy(hf: TransformersSampler) -> Callable[[list[int]], tuple[int, ...]]:
    """`hf`'s GREEDY ids for a prompt, generated once in this module: several tests compare
    with the same greedy continuation (deterministic: one row, whatever hf.batch_rows)."""

    @functools.cache
    def generated(prompt: tuple[int, ...]) -> tuple[int, ...]:
        return asyncio.run(hf.complete_tokens(list(prompt), GREEDY)).token_ids

    return lambda prompt: generated(tuple(prompt))


def _prompts(problem: str) -> list[tuple[str, list[dict[str, Any]], Any]]:
    return [("text-only", text_only_messages(problem), None), ("retool", initial_messages(problem), TOOLS)]


@pytest.mark.parametrize("problem", PROBLEMS)
def test_prompt_ids_equal_llama_cpp(problem: str, llama: LlamaSampler, hf: TransformersSampler) -> None:
    for mode, messages, tools in _prompts(problem):
        ours = hf.chat_tokenizer().render(messages, tools, True)
        theirs = llama.chat_tokenizer().render(messages, tools, True)
        assert ours == theirs, mode
        assert len(ours) > (200 if tools else 20)  # the retool system prompt and tool schema are in


def test_greedy_generations_agree_with_llama_cpp_for_a_while(
    llama: LlamaSampler,
    hf: TransformersSampler,
    greedy: Callable[[list[int]], tuple[int, ...]],
    record_property: Any,
) -> None:
    """Q4_1 dequantized to fp32 is the same weights, but llama.cpp multiplies in quantized
    form: the two drift apart after a while. Measured, and recorded per prompt."""
    agreed = []
    for problem in PROBLEMS:
        prompt = hf.chat_tokenizer().render(text_only_messages(problem), None, True)
        ours = greedy(prompt)
        theirs = asyncio.run(llama.complete_tokens(prompt, GREEDY)).token_ids
        same = next(
            (i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b),
            min(len(ours), len(theirs)),
        )
        agreed.append(same)
    record_property("greedy_tokens_before_divergence", agreed)
    print(f"greedy tokens before the first divergence from llama.cpp: {agreed}")
    assert all(n >= 3 for n in agreed), agreed  # the first tokens agree on every prompt
    assert sum(agreed) >= 40, agreed


def _sample(hf: TransformersSampler, prompt: list[int], seeds: list[int], rows: int) -> list[tuple[int, ...]]:
    async def run() -> list[Any]:
        hf.batch_rows = rows
        params = [SamplingParams(1.0, 0.95, -1, 16, seed) for seed in seeds]
        return await asyncio.gather(*(hf.complete_tokens(prompt, p) for p in params))

    before = hf.stats()["batches"]
    completions = asyncio.run(run())
    assert hf.stats()["batches"] - before == -(-len(seeds) // rows)  # really batched as asked
    return [c.token_ids for c in completions]


def test_sample_j_depends_on_its_seed_not_on_the_batch(hf: TransformersSampler, record_property: Any) -> None:
    # an open prompt: on the AIME ones SmolLM2 often samples its greedy path at T = 1
    prompt = hf.chat_tokenizer().render(OPEN, None, True)
    seeds = [11, 12, 13, 14]
    in_four = _sample(hf, prompt, seeds, 4)
    assert len(set(in_four)) == 4 and all(3 <= len(t) <= 16 for t in in_four)  # distinct seeds, rows
    alone = _sample(hf, prompt, seeds, 1)
    in_two = _sample(hf, prompt, seeds[::-1], 2)[::-1]  # other partners, other positions
    same = [a == b == c for a, b, c in zip(in_four, alone, in_two, strict=True)]
    record_property("rows_equal_across_batch_sizes_1_2_4", same)
    assert same == [True] * 4


def test_seeded_sampling_repeats_and_temperature_zero_is_greedy(
    hf: TransformersSampler, greedy: Callable[[list[int]], tuple[int, ...]]
) -> None:
    prompt = hf.chat_tokenizer().render(OPEN, None, True)
    first = _sample(hf, prompt, [5, 6], 2)
    assert _sample(hf, prompt, [5, 6], 2) == first and first[0] != first[1]
    again = asyncio.run(hf.complete_tokens(prompt, SamplingParams(0.0, 0.7, 5, 48, 99)))
    assert greedy(prompt) == again.token_ids


def test_top_k_1_and_a_tiny_top_p_are_greedy(
    hf: TransformersSampler, greedy: Callable[[list[int]], tuple[int, ...]]
) -> None:
    """top_k and top_p really filter: with k = 1, or p small enough to keep one token,
    any seed gives the greedy tokens."""
    prompt = hf.chat_tokenizer().render(text_only_messages(PROBLEMS[0]), None, True)
    hf.batch_rows = 2

    async def run() -> list[Any]:
        params = [SamplingParams(1.0, 1.0, 1, 48, s) for s in (1, 2)]
        params += [SamplingParams(1.0, 1e-6, -1, 48, s) for s in (3, 4)]
        return await asyncio.gather(*(hf.complete_tokens(prompt, p) for p in params))

    assert [c.token_ids for c in asyncio.run(run())] == [greedy(prompt)] * 4


def test_completion_ends_at_the_end_of_turn_token(hf: TransformersSampler) -> None:
    prompt = hf.chat_tokenizer().render([{"role": "user", "content": "Say hi."}], None, True)
    completion = asyncio.run(hf.complete_tokens(prompt, SamplingParams(0.0, 1.0, -1, 200, 0)))
    assert completion.finish_reason == "stop"
    assert completion.token_ids[-1] == 2  # <|im_end|> kept in the ids, cut from the text
    assert "<|im_end|>" not in completion.text and completion.text.strip()
    assert completion.completion_tokens == len(completion.token_ids) < 200


def test_adapter_probe_tells_a_live_adapter_from_a_zero_one(
    hf_checkpoint: Path, live_adapter: Path, zero_adapter: Path
) -> None:
    live = probe_adapter(live_adapter, hf_checkpoint, 1)
    zero = probe_adapter(zero_adapter, hf_checkpoint, 1)
    assert live["live"] is True and live["max_abs_logprob_diff"] > 1e-3 and "warning" not in live
    assert zero["live"] is False and zero["max_abs_logprob_diff"] == 0.0
    assert "ADAPTER IS NOT LIVE" in zero["warning"]
    assert adapter_is_live([0.0, -1.0], [0.0, -1.5]) and not adapter_is_live([0.0, -1.0], [0.0, -1.0])


def test_generation_config_defaults_of_the_checkpoint_are_not_applied(
    hf: TransformersSampler,
    greedy: Callable[[list[int]], tuple[int, ...]],
    hf_checkpoint: Path,
    tmp_path: Path,
) -> None:
    """A checkpoint whose generation_config.json asks for greedy-like, penalised sampling
    samples exactly as the plain one: only the explicit parameters count."""
    import json

    loud = tmp_path / "loud-defaults"
    loud.mkdir()
    for file in hf_checkpoint.iterdir():
        if file.name != "generation_config.json" and not file.name.startswith("."):
            (loud / file.name).symlink_to(file)
    defaults = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2, "do_sample": True}
    defaults.update(
        temperature=0.05, top_k=1, repetition_penalty=3.0, no_repeat_ngram_size=1, min_new_tokens=20
    )
    (loud / "generation_config.json").write_text(json.dumps(defaults))
    other = TransformersSampler(loud, n_threads=1, batch_rows=2)
    prompt = hf.chat_tokenizer().render(OPEN, None, True)
    assert _sample(other, prompt, [21, 22], 2) == _sample(hf, prompt, [21, 22], 2)
    assert asyncio.run(other.complete_tokens(prompt, GREEDY)).token_ids == greedy(prompt)


def test_a_row_cut_at_a_stop_string_is_the_same_in_a_batch_as_alone(hf: TransformersSampler) -> None:
    """generate() runs on for the rows still going and pads a finished one with the
    end-of-turn id: those pads are not the row's tokens (they were counted, and a
    token-in/token-out continuation carried a phantom end of turn)."""
    prompt = hf.chat_tokenizer().render(OPEN, None, True)
    rows = [SamplingParams(1.0, 1.0, -1, 48, seed, stop=(" ",)) for seed in (3, 11)]

    async def batch() -> list[Any]:
        return await asyncio.gather(*(hf.complete_tokens(prompt, p) for p in rows))

    hf.batch_rows = 2
    together = asyncio.run(batch())
    hf.batch_rows = 1
    alone = [asyncio.run(hf.complete_tokens(prompt, p)) for p in rows]
    hf.batch_rows = 4
    assert len({len(c.token_ids) for c in together}) == 2  # one row ended before the other
    for joint, single in zip(together, alone, strict=True):
        assert (joint.token_ids, joint.completion_tokens, joint.text) == (
            single.token_ids,
            single.completion_tokens,
            single.text,
        )
        assert joint.finish_reason == "stop" and joint.completion_tokens == len(joint.token_ids)


def test_a_prompt_over_n_ctx_is_the_typed_context_overflow(hf_checkpoint: Path) -> None:
    """As the GGUF backend: ContextOverflowError with the numbers, never a worded error."""
    from pytest_agenteval.models import ContextOverflowError

    small = TransformersSampler(hf_checkpoint, n_threads=1, batch_rows=1, n_ctx=16)
    prompt = small.chat_tokenizer().render(OPEN, None, True)
    with pytest.raises(ContextOverflowError) as caught:
        asyncio.run(small.complete_tokens(prompt, GREEDY))
    assert (caught.value.prompt_tokens, caught.value.context) == (len(prompt), 16)
    assert caught.value.detail == "transformers, --n-ctx"
