"""Fixtures of the AIME tests: the embedded model's sampler and real sandboxes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def embedded_sampler() -> Any:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from pytest_agenteval.api.sampler import SamplerError
    from pytest_agenteval.models import LlamaSampler, embedded_model_path

    try:
        return LlamaSampler(embedded_model_path(), embedded=True)
    except SamplerError as exc:
        pytest.skip(str(exc))


@pytest.fixture
def sandbox_factory() -> Iterator[Callable[..., Any]]:
    from pytest_agenteval.sandbox import Sandbox, SandboxConfig

    made: list[Any] = []

    def make(**config: Any) -> Any:
        made.append(Sandbox(SandboxConfig(**config)))
        return made[-1]

    yield make
    for sandbox in made:
        sandbox.close()
