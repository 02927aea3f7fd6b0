"""trio:// and tinker:// samplers split the text they decode: --thinking reaches the chat
template (`--tokenizer` here: the served tokenizer with a template that opens a think
block), and the reasoning's tokens are the tokenizer's count, against the local services."""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.config.options import OPTIONS, Settings
from pytest_agenteval.models import SamplingParams
from pytest_agenteval.models.backends.sdk import SdkSampler, close_sessions
from pytest_agenteval.models.backends.sdk_adapters import adapter_for
from tests.core.test_reasoning_in_process import MESSAGES, THINK_TEMPLATE

pytest.importorskip(
    "transformers", reason="the SDK extras are not installed: pip install -e '.[trio,tinker]'"
)

EIGHT = SamplingParams(temperature=0.0, top_p=1.0, top_k=-1, max_tokens=8, seed=0)


@pytest.fixture
def think_tokenizer(tokenizer_dir: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "think-tokenizer"
    shutil.copytree(tokenizer_dir, folder)
    (folder / "chat_template.jinja").write_text(THINK_TEMPLATE, encoding="utf-8")
    return folder


def _settings(**values: Any) -> Settings:
    return Settings(**{**{o.dest: o.default for o in OPTIONS}, **values}, explicit=frozenset())


@pytest.mark.parametrize("thinking", ["on", "off"])
def test_the_decoded_text_is_split(
    service: Any, protocol: Any, base_model: str, think_tokenizer: Path, tmp_path: Path, thinking: str
) -> None:
    service()
    settings = _settings(
        model_path=protocol.step, base_model=base_model, tokenizer=str(think_tokenizer), thinking=thinking
    )
    sampler = SdkSampler(adapter_for(protocol.scheme), settings, 4, tmp_path / "home")

    async def sample() -> list[Any]:
        try:
            one = await sampler.complete(MESSAGES, EIGHT)
            return [one, *await sampler.complete_n(MESSAGES, dataclasses.replace(EIGHT, temperature=1.0), 2)]
        finally:
            await sampler.aclose()

    try:
        completions = asyncio.run(sample())
    finally:
        close_sessions()
    tokenizer = sampler.chat_tokenizer()
    opened = tokenizer.decode(tokenizer.render(MESSAGES)).endswith("assistant\n<think>\n")
    assert opened is (thinking == "on")
    for done in completions:
        decoded = tokenizer.decode(done.token_ids)  # the end-of-sequence id decodes to nothing
        if thinking == "on":  # SmolLM2 never closes the block the prompt opened, cut off or stopping
            expected = ("", decoded, False, done.completion_tokens)
        else:
            expected = (decoded, None, True, 0)
        assert (done.text, done.reasoning, done.reasoning_closed, done.reasoning_tokens) == expected
        assert done.completion_tokens == len(done.token_ids) > 0
        assert done.reasoning_tokens_estimated is False
