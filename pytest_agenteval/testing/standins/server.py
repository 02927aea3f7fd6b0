"""The stand-ins' HTTP surface: the package's mock server (`ServerCore`) with what vLLM's
and SGLang's OpenAI servers add: `/health`, `/version`, `/detokenize`, a `/v1/models` that
lists the base (`root`, `max_model_len`) and each LoRA module (`parent`), the model check,
the `--generation-config` defaults, greedy logprobs that depend on the weights asked for
(so the adapter-is-live probe tells a LoRA from its base), and one JSON line per
completion request in `AGENTEVAL_STANDIN_LOG`."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from pytest_agenteval.testing._app import ServerCore, _Attempt, openai_error
from pytest_agenteval.testing._config import ServerConfig
from pytest_agenteval.testing._server import OpenAITestServer
from pytest_agenteval.testing._tokenize import char_tokens, decode_chars, render_chatml

LOG_ENV = "AGENTEVAL_STANDIN_LOG"


@dataclass(frozen=True)
class Served:
    """What one stand-in serves, read from its command line."""

    backend: str  # "vllm" | "sglang"
    names: tuple[str, ...]  # the base's served names (the first is the one it reports)
    root: str  # the base's /v1/models root: vLLM the model path, SGLang the served name
    weights: str  # the base's model path (what its logprobs derive from)
    max_model_len: int
    loras: Mapping[str, str] = field(default_factory=dict)  # name -> path
    lora_parent: Mapping[str, str] = field(default_factory=dict)  # name -> base name
    defaults: Mapping[str, Any] = field(default_factory=dict)  # --generation-config sampling defaults
    version: str = ""


def token_logprob(weights: str, index: int, token: int) -> float:
    """A logprob in (-1, 0] fixed by the weights, the position and the token."""
    digest = hashlib.sha256(f"{weights}|{index}|{token}".encode()).digest()
    return -int.from_bytes(digest[:4], "big") / 2**32


class StandinCore(ServerCore):
    """`ServerCore` answering as vLLM (or SGLang) does for the model it serves."""

    def __init__(self, config: ServerConfig, served: Served) -> None:
        super().__init__(config)
        self.served = served
        self.log_file = os.environ.get(LOG_ENV) or None
        self.max_model_len = served.max_model_len  # /tokenize's, as /v1/models reports it

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/health", self._health)
        app.router.add_get("/version", self._version)
        app.router.add_post("/detokenize", self._detokenize)

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def _version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": self.served.version})

    async def _detokenize(self, request: web.Request) -> web.Response:
        body = await request.json()
        tokens = body.get("tokens") if isinstance(body, dict) else None
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            return openai_error(400, "'tokens' must be a list of token ids.", "BadRequestError")
        return web.json_response({"prompt": decode_chars(tokens)})

    async def _models(self, request: web.Request) -> web.Response:
        denied = self._auth_error(request)
        if denied is not None:
            return denied
        served = self.served
        cards = [
            {"id": name, "object": "model", "created": 0, "owned_by": served.backend, "root": served.root,
             "parent": None, "max_model_len": served.max_model_len}
            for name in served.names
        ]  # fmt: skip
        for name, path in served.loras.items():
            card = {"id": name, "object": "model", "created": 0, "owned_by": served.backend, "root": path}
            card.update(parent=served.lora_parent.get(name, served.names[0]), max_model_len=None)
            cards.append(card)
        return web.json_response({"object": "list", "data": cards})

    # -- which weights a request asks for -------------------------------------------------
    def weights_of(self, body: Mapping[str, Any]) -> str | None:
        """The path of the weights that answer `body`; None: the model is not served."""
        model = body.get("model")
        served = self.served
        if served.backend == "sglang":  # any name is the base; `base:adapter` (or lora_path) a LoRA
            adapter = body.get("lora_path") if isinstance(body.get("lora_path"), str) else None
            if isinstance(model, str) and ":" in model and model not in served.names:
                adapter = model.split(":", 1)[1].strip() or None
            if adapter is None:
                return served.weights
            return served.loras.get(adapter)
        if not model or model in served.names:
            return served.weights
        return served.loras.get(model) if isinstance(model, str) else None

    def _validate(self, body: dict[str, Any] | None, endpoint: str) -> web.Response | None:
        error = super()._validate(body, endpoint)
        if error is not None or body is None or self.weights_of(body) is not None:
            return error
        if self.served.backend == "sglang":
            problem = f"LoRA adapter for {body.get('model')!r} is not loaded."
            return openai_error(400, problem, "BadRequestError")
        return openai_error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError", None)

    # -- the request log ------------------------------------------------------------------
    async def _generation(self, request: web.Request, endpoint: str) -> web.StreamResponse:
        if self.log_file:
            raw = await request.read()  # aiohttp keeps it for the handler
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
            model = body.get("model") if isinstance(body, dict) else None
            line = json.dumps({"model": model, "path": request.path, "body": body}, sort_keys=True) + "\n"
            fd = os.open(self.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode())  # one write: lines of several stand-ins never mix
            finally:
                os.close(fd)
        return await super()._generation(request, endpoint)

    # -- replies --------------------------------------------------------------------------
    def _payload(self, body: dict[str, Any], rec: _Attempt) -> dict[str, Any]:
        effective = {**{k: v for k, v in self.served.defaults.items() if body.get(k) is None}, **body}
        payload = super()._payload(effective, rec)
        if "prompt_ids" not in body:  # the prompt's tokens as /tokenize counts them
            prompt = body.get("prompt")
            text = render_chatml(body) if "messages" in body else prompt if isinstance(prompt, str) else None
            usage = payload.get("usage")
            if text is not None and isinstance(usage, dict):
                usage["prompt_tokens"] = len(char_tokens(text))
                usage["total_tokens"] = usage["prompt_tokens"] + usage.get("completion_tokens", 0)
        weights = self.weights_of(body) or self.served.weights
        wants = body.get("logprobs")
        if wants is None or wants is False:
            return payload
        for choice in payload["choices"]:
            if rec.endpoint == "chat":
                text = (choice.get("message") or {}).get("content") or ""
                content = [
                    {"token": chr(t), "logprob": token_logprob(weights, i, t), "bytes": list(chr(t).encode()),
                     "top_logprobs": []}
                    for i, t in enumerate(char_tokens(text))
                ]  # fmt: skip
                choice["logprobs"] = {"content": content}
            else:
                tokens = char_tokens(choice.get("text") or "")
                choice["logprobs"] = {
                    "tokens": [chr(t) for t in tokens],
                    "token_logprobs": [token_logprob(weights, i, t) for i, t in enumerate(tokens)],
                    "top_logprobs": [{chr(t): token_logprob(weights, i, t)} for i, t in enumerate(tokens)],
                    "text_offset": list(range(len(tokens))),
                }
        return payload


class StandinServer(OpenAITestServer):
    """A stand-in's HTTP surface in this process, on a thread (what its tests use; the
    `vllm` and `sglang.launch_server` stand-ins run `StandinCore` in a process of their own)."""

    def __init__(self, config: ServerConfig, served: Served) -> None:
        super().__init__(config)
        self._core = StandinCore(self.config, served)
