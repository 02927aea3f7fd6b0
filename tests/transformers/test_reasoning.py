"""The transformers backend's reasoning split: --thinking reaches the checkpoint's chat
template (here `--chat-template` one that opens a think block), the tags come from it,
and the reasoning's tokens are counted with the checkpoint's tokenizer."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from pytest_agenteval.api.sampler import Completion
from pytest_agenteval.models import SamplingParams
from pytest_agenteval.models.reasoning import ThinkSplit
from tests.core.test_reasoning_in_process import MESSAGES, THINK_TEMPLATE
from tests.transformers import skip_without_backend

skip_without_backend()

from pytest_agenteval.models.backends.transformers import TransformersSampler  # noqa: E402

EIGHT = SamplingParams(temperature=0.0, top_p=1.0, top_k=-1, max_tokens=8, seed=0)


@pytest.fixture(scope="module")
def think_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "think.jinja"
    path.write_text(THINK_TEMPLATE, encoding="utf-8")
    return path


@pytest.mark.parametrize("rows", [1, 2])
def test_thinking_on_opens_the_block_and_a_cut_off_reply_is_unclosed(
    hf_checkpoint: Path, think_template: Path, rows: int
) -> None:
    sampler = TransformersSampler(
        hf_checkpoint, chat_template=str(think_template), batch_rows=rows, think=ThinkSplit(thinking="on")
    )
    tokenizer = sampler.chat_tokenizer()
    assert tokenizer.decode(tokenizer.render(MESSAGES)).endswith("What is 30 + 40?\nassistant\n<think>\n")

    async def sample() -> list[Completion]:
        params = [dataclasses.replace(EIGHT, seed=seed) for seed in range(rows)]
        return list(await asyncio.gather(*(sampler.complete(MESSAGES, p) for p in params)))

    for done in asyncio.run(sample()):
        assert (done.text, done.finish_reason, done.reasoning_closed) == ("", "length", False)
        assert done.reasoning == tokenizer.decode(done.token_ids) and done.reasoning
        assert (done.reasoning_tokens, done.completion_tokens, done.reasoning_tokens_estimated) == (
            8,
            8,
            False,
        )
    asyncio.run(sampler.aclose())


def test_thinking_off_and_a_closed_block_counted_with_the_tokenizer(
    hf_checkpoint: Path, think_template: Path
) -> None:
    sampler = TransformersSampler(hf_checkpoint, chat_template=str(think_template))
    tokenizer = sampler.chat_tokenizer()
    assert tokenizer.decode(tokenizer.render(MESSAGES)).endswith("What is 30 + 40?\nassistant\n")
    done = asyncio.run(sampler.complete(MESSAGES, EIGHT))
    assert (done.text, done.reasoning, done.reasoning_tokens) == (tokenizer.decode(done.token_ids), None, 0)
    reasoning = "30 + 40 is 70, and seventy is the sum"
    ids = tokenizer.encode(f"<think>{reasoning}</think>The answer is 70.")
    split = sampler.reasoning_split(Completion(tokenizer.decode(ids), "stop", completion_tokens=len(ids)))
    assert (split.text, split.reasoning, split.reasoning_closed) == ("The answer is 70.", reasoning, True)
    assert (split.reasoning_tokens, split.reasoning_tokens_estimated) == (
        16,
        False,
    )  # as llama.cpp's vocabulary
    asyncio.run(sampler.aclose())
