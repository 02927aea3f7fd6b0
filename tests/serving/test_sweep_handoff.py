"""A sweep's later server reaches the workers through a file: owner-only, written whole, and
a sampler that waits for it (then sends there with the key it holds) or errors with why."""

from __future__ import annotations

import asyncio
import stat
import threading
import time
from pathlib import Path

import pytest

from pytest_agenteval.api.sampler import SamplerError, SamplingParams
from pytest_agenteval.config.settings import Settings
from pytest_agenteval.models import ModelChoice, make_sampler
from pytest_agenteval.models.serve.handoff import is_ready, read_served, served_file, write_served
from pytest_agenteval.testing import DEFAULT_ANSWER, OpenAITestServer, ServerConfig

KEY = "sweep-key-not-for-logs"
PARAMS = SamplingParams(temperature=0.0, top_p=1.0, top_k=0, seed=0, max_tokens=64)


def placeholder(folder: Path, label: str = "step-200") -> ModelChoice:
    served = {"label": label, "pending": str(served_file(folder, label)), "fingerprint": "f" * 64}
    return ModelChoice("openai", model_name="agenteval-ffffffffffff", served=served)


def served_data(url: str) -> dict:
    return {
        "endpoints": [url],
        "model_name": "agenteval-ffffffffffff",
        "key": KEY,
        "served": {
            "label": "step-200",
            "fingerprint": "f" * 64,
            "logs": {url: "/tmp/x.log"},
            "streams": False,
        },
    }


def test_the_served_file_is_owner_only_and_written_whole(tmp_path: Path) -> None:
    path = write_served(tmp_path, "step-200", {"endpoints": ["http://127.0.0.1:1/v1"], "key": KEY})
    assert path == tmp_path / "served-step-200.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_served(path) == {"endpoints": ["http://127.0.0.1:1/v1"], "key": KEY}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["served-step-200.json"]  # no temporary left


def test_ready_only_once_the_file_is_there(tmp_path: Path) -> None:
    path = served_file(tmp_path, "step-200")
    assert not is_ready(path)
    write_served(tmp_path, "step-200", {"error": "did not start"})
    assert is_ready(path)


def test_a_later_wave_sampler_sends_to_the_server_written_later(tmp_path: Path) -> None:
    settings = Settings()
    with OpenAITestServer(ServerConfig(api_key=KEY)) as server:
        sampler = make_sampler(placeholder(tmp_path), settings, 2)
        # the cache key is known before the server exists: the launched one's, port-free
        assert (sampler.identity.name, sampler.identity.location) == ("agenteval-ffffffffffff", "launched")
        assert sampler.identity.fingerprint == "f" * 64
        later = threading.Timer(0.6, lambda: write_served(tmp_path, "step-200", served_data(server.url)))
        later.start()

        async def ask() -> tuple[str, float]:
            started = time.monotonic()
            completion = await sampler.complete([{"role": "user", "content": "hi"}], PARAMS)
            await sampler.aclose()
            return completion.text, time.monotonic() - started

        text, waited = asyncio.run(ask())
        later.join()
        assert waited >= 0.6
        assert text == DEFAULT_ANSWER
        (request,) = server.requests
        assert (request["model"], request["outcome"]) == (
            "agenteval-ffffffffffff",
            "ok",
        )  # with the key it held


def test_a_server_that_failed_turns_each_call_into_its_reason(tmp_path: Path) -> None:
    write_served(tmp_path, "step-200", {"error": "llama-cpp server exited with code 2; log /x/server.log"})
    sampler = make_sampler(placeholder(tmp_path), Settings(), 2)
    with pytest.raises(SamplerError) as caught:
        asyncio.run(sampler.complete([{"role": "user", "content": "hi"}], PARAMS))
    assert str(caught.value) == "llama-cpp server exited with code 2; log /x/server.log"
