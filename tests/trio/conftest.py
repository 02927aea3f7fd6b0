"""Local PyTRIO and Tinker services (real sockets, driven by the real SDKs) whose sample
routes generate with the embedded SmolLM2 from token ids, and the tokenizer folder they
serve. `service` runs each test once per protocol."""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.models import LlamaSampler, embedded_model_path
from pytest_agenteval.testing._sdk_server import SdkServer, SdkServerConfig, gguf_tokenizer_dir


@dataclass(frozen=True)
class Protocol:
    """What differs between the two services, as a test sees it."""

    scheme: str
    vendor: str
    key_env: str
    url_env: str
    key: str
    rejected_key: str  # well-formed for the SDK, refused by the server
    ended: str  # how a session that finished normally is recorded
    cancelled: str  # how a session ended by Ctrl-C is recorded
    base: str  # the base model's name ("" here: the tokenizer folder, as Tinker needs)
    cap: int  # the SDK's own limit of sample requests in flight (PyTRIO's default; our server's)

    @property
    def step(self) -> str:
        return f"{self.scheme}://run-1/sampler_weights/step-12"

    @property
    def foreign(self) -> str:  # a checkpoint trained from the other base model
        return f"{self.scheme}://run-2/sampler_weights/step-3"

    def server_class(self) -> type[SdkServer]:
        if self.scheme == "trio":
            from pytest_agenteval.testing.trio_server import TrioTestServer

            return TrioTestServer
        from pytest_agenteval.testing.tinker_server import TinkerTestServer

        return TinkerTestServer


PROTOCOLS = {
    "trio": Protocol(
        "trio",
        "PyTRIO",
        "PYTRIO_API_KEY",
        "PYTRIO_BASE_URL",
        "test-key",
        "stale-key-7",
        "ENDED",
        "CANCELLED",
        "smol",
        16,
    ),
    # Tinker's get_tokenizer() loads the base model's name: a local folder keeps it offline
    "tinker": Protocol(
        "tinker",
        "Tinker",
        "TINKER_API_KEY",
        "TINKER_BASE_URL",
        "tml-test",
        "tml-old",
        "success",
        "interrupted",
        "",
        2000,
    ),
}


@pytest.fixture(params=sorted(PROTOCOLS))
def protocol(request: pytest.FixtureRequest) -> Protocol:
    pytest.importorskip("pytrio" if request.param == "trio" else "tinker", reason="SDK extra not installed")
    return PROTOCOLS[request.param]


# transformers converts the gguf's vocabulary only with torch and gguf, which README
# command 2 installs (command 1 brings transformers alone, with the SDKs)
TOKENIZER_NEEDS = {
    "transformers": "pip install -e '.[transformers]'",
    "torch": "pip install torch==2.13.0",
    "gguf": "pip install -e '.[transformers]'",
}


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    missing = [module for module in TOKENIZER_NEEDS if importlib.util.find_spec(module) is None]
    if missing:
        installs = " && ".join(dict.fromkeys(TOKENIZER_NEEDS[module] for module in missing))
        pytest.skip(
            f"the tokenizer folder is converted from the gguf, which needs {', '.join(missing)}: {installs}"
        )
    return gguf_tokenizer_dir(embedded_model_path(), tmp_path_factory.mktemp("smol-tokenizer"))


class RepeatableSampler:
    """The services' generator: the embedded SmolLM2, answering a request it has answered
    before (the same prompt ids and sampling parameters, seed included) with the same
    sample, as a deterministic server would.

    The services are shared by a test's runs with and without workers, whose requests come
    in other orders, and llama.cpp's sample depends on the request before it (a reused KV
    prefix rounds differently, docs/models.md). `LlamaSampler(fresh_prompts=True)` removes
    that by evaluating every prompt from its first token: measured, it made
    tests/trio/test_sdk_samplers.py 5x slower (111 s -> 623 s of test time in a loaded full
    run). Here a first request is generated with prefix reuse and a repeat is answered from
    memory, so equal generations across runs still mean equal requests: a run that sent
    another seed or other ids gets a new sample and the comparison fails."""

    def __init__(self, sampler: LlamaSampler) -> None:
        self.sampler = sampler
        self.generated = 0  # samples the model generated (misses)
        self._answers: dict[tuple[tuple[int, ...], Any], Any] = {}
        self._lock = threading.Lock()

    async def complete_tokens(self, prompt: Any, params: Any) -> Any:
        key = (tuple(prompt), params)
        with self._lock:
            known = self._answers.get(key)
        if known is not None:
            return known
        completion = await self.sampler.complete_tokens(prompt, params)
        with self._lock:
            self.generated += 1
            return self._answers.setdefault(key, completion)  # a concurrent twin: the first kept


@pytest.fixture(scope="session")
def generator() -> Iterator[RepeatableSampler]:
    sampler = LlamaSampler(embedded_model_path(), embedded=True, n_ctx=4096)
    sampler._load()  # loaded before any server starts: no first request waits on it
    yield RepeatableSampler(sampler)


@pytest.fixture
def base_model(protocol: Protocol, tokenizer_dir: Path) -> str:
    return protocol.base or str(tokenizer_dir)


@pytest.fixture
def service(
    protocol: Protocol,
    base_model: str,
    tokenizer_dir: Path,
    generator: RepeatableSampler,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Callable[..., Any]]:
    """Start this protocol's server with these config overrides; point the SDK at it."""
    started: list[SdkServer] = []

    def start(**overrides: Any) -> Any:
        config = SdkServerConfig(
            api_key=protocol.key,
            base_models={base_model: str(tokenizer_dir), "other-base": str(tokenizer_dir)},
            checkpoints={protocol.step: base_model, protocol.foreign: "other-base"},
            **overrides,
        )
        server = protocol.server_class()(config, generator).start()
        started.append(server)
        monkeypatch.setenv(protocol.url_env, server.url)
        monkeypatch.setenv(protocol.key_env, protocol.key)
        return server

    yield start
    for server in started:
        server.close()
