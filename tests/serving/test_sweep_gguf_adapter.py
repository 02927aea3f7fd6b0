"""A gguf LoRA as a sweep model: recognised from its header, resolved with its base gguf,
and served beside it by one llama.cpp server from a config file of aliases."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pytest_agenteval.models._llama import embedded_model_path
from pytest_agenteval.models.serve.commands import llama_cpp_config_command
from pytest_agenteval.models.serve.resolve import ResolveError, gguf_type, resolve_model_path

from ._gguf_lora import make_gguf_lora


@pytest.fixture(scope="module")
def lora(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_gguf_lora(embedded_model_path(), tmp_path_factory.mktemp("lora") / "lora.gguf", seed=3)


def test_the_header_says_model_or_adapter(lora: Path, tmp_path: Path) -> None:
    (tmp_path / "x.gguf").write_bytes(b"not a gguf")
    assert [gguf_type(embedded_model_path()), gguf_type(lora), gguf_type(tmp_path / "x.gguf")] == [
        "model",
        "adapter",
        None,
    ]


def test_a_gguf_lora_resolves_with_its_base_gguf(lora: Path) -> None:
    model = resolve_model_path(str(lora), base_model=str(embedded_model_path()))
    assert (model.kind, model.path, model.base.kind, model.base.path) == (
        "adapter",
        lora,
        "gguf",
        embedded_model_path(),
    )
    assert model.weights_fingerprint not in (model.fingerprint, model.base.fingerprint)


@pytest.mark.parametrize(
    ("base", "message"),
    [
        (None, "a gguf LoRA adapter names no base; pass --base-model BASE.gguf"),
        ("LORA", "the base of a gguf LoRA must be a .gguf model file"),
    ],
)
def test_a_gguf_lora_without_a_usable_base_is_one_line(lora: Path, base, message) -> None:
    with pytest.raises(ResolveError) as caught:
        resolve_model_path(str(lora), base_model=str(lora) if base == "LORA" else base)
    assert str(caught.value).endswith(message)


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
            {"model_alias": "a-base", "n_threads": 2, "n_ctx": 512, "model": str(embedded_model_path())},
            {
                "model_alias": "a-lora",
                "n_threads": 2,
                "n_ctx": 512,
                "model": str(embedded_model_path()),
                "lora_path": str(lora),
            },
        ],
    }
