"""pytest fixtures for users who test their own suites, agents or judges against the test
server (registered by the plugin's entry point `agenteval-testing`; nothing is imported until
a test asks for one):

    def test_my_suite_scores_a_right_answer(pytester, agenteval_openai_server_factory):
        server = agenteval_openai_server_factory(answer="It is \\\\boxed{42}.")
        result = pytester.runpytest(f"--endpoint={server.url}", ...)

`agenteval_openai_server` is one server with the defaults (no latency, no faults, any model
name); the factory takes any `ServerConfig` field as a keyword. Every server started through
them is closed when the test ends.

For a sweep (several models in one run) on a CPU, `agenteval_model_files` makes real model
files from the embedded SmolLM2 gguf once per test session (testing/models.py):
`agenteval_gguf_lora` (a seeded GGUF LoRA adapter) and `agenteval_perturbed_gguf` (a
second gguf that generates differently) are its two most used files."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pathlib import Path

    from pytest_agenteval.testing._server import OpenAITestServer
    from pytest_agenteval.testing.models import ModelFiles


@pytest.fixture
def agenteval_openai_server_factory() -> Iterator[Callable[..., OpenAITestServer]]:
    """Start OpenAI-compatible test servers on loopback: `factory(**ServerConfig fields)`."""
    from pytest_agenteval.testing._config import ServerConfig
    from pytest_agenteval.testing._server import OpenAITestServer

    started: list[OpenAITestServer] = []

    def start(**config: Any) -> OpenAITestServer:
        server = OpenAITestServer(ServerConfig(**config))
        server.start()
        started.append(server)
        return server

    yield start
    for server in reversed(started):
        server.close()


@pytest.fixture
def agenteval_openai_server(
    agenteval_openai_server_factory: Callable[..., OpenAITestServer],
) -> OpenAITestServer:
    """One running test server with the defaults; `.url` is its `http://127.0.0.1:PORT/v1`."""
    return agenteval_openai_server_factory()


@pytest.fixture(scope="session")
def agenteval_model_files(tmp_path_factory: pytest.TempPathFactory) -> ModelFiles:
    """Model files made on demand, once per session, in a temporary folder:
    `.gguf_lora(seed)`, `.perturbed_gguf(seed)`, `.hf_checkpoint()`, `.peft_adapter(seed)`
    (the last two need torch, transformers and peft)."""
    from pytest_agenteval.testing.models import ModelFiles

    return ModelFiles(tmp_path_factory.mktemp("agenteval-models"))


@pytest.fixture(scope="session")
def agenteval_gguf_lora(agenteval_model_files: ModelFiles) -> Path:
    """A seeded (seed 0, rank 8) GGUF LoRA adapter of the embedded SmolLM2 gguf."""
    return agenteval_model_files.gguf_lora()


@pytest.fixture(scope="session")
def agenteval_perturbed_gguf(agenteval_model_files: ModelFiles) -> Path:
    """The embedded SmolLM2 gguf with a few norm weights perturbed (seed 0)."""
    return agenteval_model_files.perturbed_gguf()
