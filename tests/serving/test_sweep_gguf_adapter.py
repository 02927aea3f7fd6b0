"""A gguf LoRA in a sweep is served beside its base gguf by one llama.cpp server, from a
config file of aliases (resolving it is lora-fixtures' tests/serving/test_gguf_adapter.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pytest_agenteval.models.backends.llama import embedded_model_path
from pytest_agenteval.models.serve.commands import llama_cpp_config_command
from pytest_agenteval.models.serve.resolve import resolve_model_path


@pytest.fixture(scope="module")
def lora(agenteval_gguf_lora: Path) -> Path:
    """The session's gguf LoRA (testing/fixtures.py): any adapter of the embedded gguf will do."""
    return agenteval_gguf_lora


def test_base_and_lora_in_one_config_file_without_the_key(lora: Path, tmp_path: Path) -> None:
    base = resolve_model_path(str(embedded_model_path()))
    adapter = resolve_model_path(str(lora), base_model=str(embedded_model_path()))
    config = tmp_path / "server.json"
    spec = llama_cpp_config_command(
        [("a-base", base), ("a-lora", adapter)], 4321, config, n_threads=2, n_ctx=512
    )
    assert spec.argv == (sys.executable, "-m", "llama_cpp.server", "--config_file", str(config))
    assert (spec.served_name, spec.key_env, spec.url) == ("a-base", "API_KEY", "http://127.0.0.1:4321/v1")
    assert json.loads(config.read_text()) == {
        "host": "127.0.0.1",
        "port": 4321,
        "models": [
            {
                "model_alias": "a-base",
                "n_threads": 2,
                "n_threads_batch": 2,
                "n_ctx": 512,
                "model": str(embedded_model_path()),
            },
            {
                "model_alias": "a-lora",
                "n_threads": 2,
                "n_threads_batch": 2,
                "n_ctx": 512,
                "model": str(embedded_model_path()),
                "lora_path": str(lora),
            },
        ],
    }
