"""pytest fixtures for users who test their own suites, agents or judges against the test
server (registered by the plugin's entry point `agenteval-testing`; nothing is imported until
a test asks for one):

    def test_my_suite_scores_a_right_answer(pytester, agenteval_openai_server_factory):
        server = agenteval_openai_server_factory(answer="It is \\\\boxed{42}.")
        result = pytester.runpytest(f"--endpoint={server.url}", ...)

`agenteval_openai_server` is one server with the defaults (no latency, no faults, any model
name); the factory takes any `ServerConfig` field as a keyword. Every server started through
them is closed when the test ends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_agenteval.testing._server import OpenAITestServer


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
