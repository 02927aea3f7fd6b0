"""What the local PyTRIO (and later Tinker) protocol servers share: a real aiohttp server on
a loopback socket, run on its own thread, whose sample route generates with the in-process
SmolLM2 model from token ids, with the OpenAI test server's fault injection (429, 500,
reset, silent stall) and request log. Protocol modules add their routes."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from pytest_agenteval.testing._app import request_key
from pytest_agenteval.testing._faults import FaultInjector, FaultPlan
from pytest_agenteval.testing._stats import InFlightTracker, RequestLog, outcome_counts

SDK_FAULT_KINDS = {"429": 1.0, "500": 1.0, "reset": 1.0}  # stall only where a test asks for it


def gguf_tokenizer_dir(gguf: Path, dest: Path) -> Path:
    """A Hugging Face tokenizer folder (tokenizer.json, tokenizer_config.json with the chat
    template) converted from the GGUF's own vocabulary, so `AutoTokenizer.from_pretrained`
    offline gives exactly the ids llama.cpp samples from."""
    if not (dest / "tokenizer.json").is_file():
        from transformers import AutoTokenizer

        AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(str(dest))
    return dest


@dataclass
class SdkServerConfig:
    """Who may sample what: the key, the base models (name -> tokenizer folder served as the
    model id) and the checkpoints (URI -> the base model they were trained from)."""

    api_key: str = "test-key"
    base_models: Mapping[str, str] = field(default_factory=dict)
    checkpoints: Mapping[str, str] = field(default_factory=dict)
    fault_rate: float = 0.0
    fault_kinds: Mapping[str, float] = field(default_factory=lambda: dict(SDK_FAULT_KINDS))
    fault_seed: int = 0
    fault_plan: FaultPlan | None = None
    stall_s: float = 30.0  # a stalled sample request sleeps this long, then drops the connection
    max_batch_size: int = 64


Generate = Callable[[list[int], dict[str, Any], int], Any]  # (ids, sampling_params, seed) -> Completion


class SdkServer:
    """The shared half: lifecycle on a daemon thread, fault decisions, the log."""

    def __init__(self, config: SdkServerConfig, generator: Any) -> None:
        self.config = config
        self.generator = generator  # an object with async complete_tokens(ids, SamplingParams)
        self.injector = FaultInjector(
            rate=config.fault_rate, mix=config.fault_kinds, seed=config.fault_seed, plan=config.fault_plan
        )
        self.log = RequestLog()
        self.tracker = InFlightTracker()
        self.calls: dict[str, int] = {}  # every route's request count, sample included
        self.port: int | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    # -- to be filled by a protocol ---------------------------------------------------
    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    # -- lifecycle --------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> SdkServer:
        ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main(ready)), daemon=True)
        self._thread.start()
        if not ready.wait(timeout) or self.port is None:
            raise RuntimeError("the SDK test server did not start")
        return self

    async def _main(self, ready: threading.Event) -> None:
        app = web.Application(client_max_size=64 * 2**20)
        self.routes(app)
        runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=512)
        await site.start()
        self.port = int(runner.addresses[0][1])
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        ready.set()
        try:
            await self._stop.wait()
        finally:
            await runner.cleanup()

    def close(self) -> None:
        if self._thread is None:
            return
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        self._thread = None

    def __enter__(self) -> SdkServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- helpers for protocols --------------------------------------------------------
    def count(self, route: str) -> None:
        self.calls[route] = self.calls.get(route, 0) + 1

    def requests_started(self) -> int:
        """Sample requests that arrived, the ones still being answered included."""
        return self.calls.get("sample", 0)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """One entry per sample request attempt: key, attempt, outcome, the whole body."""
        return self.log.entries()

    def stats(self) -> dict[str, Any]:
        return {
            "outcomes": outcome_counts(self.requests),
            "calls": dict(self.calls),
            **self.tracker.snapshot(),
        }

    async def sample(
        self, request: web.Request, body: dict[str, Any], answer: Callable[[list[Any]], dict[str, Any]]
    ) -> web.StreamResponse:
        """One sample request: decide its fault (keyed on the body without its request id, so
        a retry draws again and the pattern repeats run to run), then generate each sequence
        j with seed `seed + j`, the rule the log documents."""
        self.count("sample")
        key = request_key({k: v for k, v in body.items() if k not in ("request_id", "seq_id")})
        attempt = self.injector.next_attempt(key)
        entry: dict[str, Any] = {
            "t": time.time(),
            "key": key,
            "attempt": attempt,
            "outcome": "cancelled",
            "body": body,
        }
        self.tracker.enter()
        try:
            fault = self.injector.decide(key, attempt, "sample", body)
            entry["outcome"] = fault or "ok"
            if fault == "stall":
                await asyncio.sleep(self.config.stall_s)
                return _abort(request)
            if fault == "reset":
                return _abort(request)
            if fault in ("429", "500", "503"):
                return web.json_response(
                    {"code": f"injected.{fault}", "message": f"injected fault {fault}"},
                    status=int(fault),
                    headers={"Retry-After": "0"} if fault == "429" else None,
                )
            completions = await self._generate(body)
            return web.json_response(answer(completions))
        finally:
            self.tracker.exit()
            self.log.append(entry)

    async def _generate(self, body: Mapping[str, Any]) -> list[Any]:
        from pytest_agenteval.models import SamplingParams

        ids = prompt_ids(body["prompt"])
        params = body.get("sampling_params") or {}
        seed = params.get("seed")
        stop = params.get("stop") or ()
        out = []
        for j in range(int(body.get("num_samples") or 1)):
            sampling = SamplingParams(
                temperature=float(params.get("temperature", 1.0)),
                top_p=float(params.get("top_p", 1.0)),
                top_k=int(params.get("top_k", -1)),
                max_tokens=int(params["max_tokens"]),
                seed=(int(seed) if seed is not None else 0) + j,
                stop=tuple([stop] if isinstance(stop, str) else stop),
            )
            out.append(await self.generator.complete_tokens(ids, sampling))
        return out


def prompt_ids(prompt: Mapping[str, Any]) -> list[int]:
    """The ids of a `ModelInput` on the wire (encoded_text chunks, in order)."""
    ids: list[int] = []
    for chunk in prompt.get("chunks") or ():
        if chunk.get("type", "encoded_text") != "encoded_text":
            raise ValueError("the test server takes token chunks only")
        ids.extend(int(t) for t in chunk.get("tokens") or ())
    return ids


def stop_reason(completion: Any) -> str:
    return "length" if completion.finish_reason == "length" else "stop"


def _abort(request: web.Request) -> web.StreamResponse:
    if request.transport is not None:
        request.transport.abort()  # no response bytes at all
    return web.Response(status=500)  # never sent


def sequences_field(completions: Sequence[Any]) -> list[dict[str, Any]]:
    """PyTRIO's sequences: the sampled ids; no text (the client decodes it from the ids)."""
    return [
        {
            "tokens": list(c.token_ids),
            "text": None,
            "logprobs": [],  # llama.cpp's generate gives no logprobs; the SDKs do not require them
            "stop_reason": stop_reason(c),
        }
        for c in completions
    ]
