"""A local PyTRIO service (real socket, real SDK) whose sample route generates with the
embedded SmolLM2 from token ids, and the tokenizer folder it serves as the model id."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.samplers import LlamaSampler, embedded_model_path
from pytest_agenteval.testing._sdk_server import SdkServerConfig, gguf_tokenizer_dir
from pytest_agenteval.testing.trio_server import TrioTestServer

pytest.importorskip("pytrio", reason="the trio extra is not installed")

BASE = "smol-base"
OTHER_BASE = "other-base"
STEP = "trio://run-1/sampler_weights/step-12"
FOREIGN = "trio://run-2/sampler_weights/step-3"  # trained from OTHER_BASE
KEY = "test-key"


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return gguf_tokenizer_dir(embedded_model_path(), tmp_path_factory.mktemp("smol-tokenizer"))


@pytest.fixture(scope="session")
def generator() -> Iterator[LlamaSampler]:
    sampler = LlamaSampler(embedded_model_path(), embedded=True, n_ctx=4096)
    yield sampler


@pytest.fixture
def trio_server(
    tokenizer_dir: Path, generator: LlamaSampler, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., TrioTestServer]]:
    """Start a server with these config overrides and point the SDK's variables at it."""
    started: list[TrioTestServer] = []

    def start(**overrides: Any) -> TrioTestServer:
        config = SdkServerConfig(
            api_key=KEY,
            base_models={BASE: str(tokenizer_dir), OTHER_BASE: str(tokenizer_dir)},
            checkpoints={STEP: BASE, FOREIGN: OTHER_BASE},
            **overrides,
        )
        server = TrioTestServer(config, generator).start()
        started.append(server)
        monkeypatch.setenv("PYTRIO_BASE_URL", server.url)
        monkeypatch.setenv("PYTRIO_API_KEY", KEY)
        return server

    yield start
    for server in started:
        server.close()
