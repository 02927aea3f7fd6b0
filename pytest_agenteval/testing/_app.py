# One concept, over 500 lines: the mock server's one aiohttp app (routes, faults, replies, billing)
"""The aiohttp application behind the mock server: routing, validation, faults, replies."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from pytest_agenteval.testing._batch import BatchService
from pytest_agenteval.testing._billing import UNBILLED_FAULTS, Billing, bill_ids
from pytest_agenteval.testing._config import ServerConfig
from pytest_agenteval.testing._faults import FaultInjector, unit_draw
from pytest_agenteval.testing._overflow import request_overflow
from pytest_agenteval.testing._ratelimit import ConcurrencyLimit
from pytest_agenteval.testing._render import estimate_prompt_tokens, render_choice, tool_names
from pytest_agenteval.testing._responders import last_user_text, normalize_replies
from pytest_agenteval.testing._sse import sse_events, wants_stream
from pytest_agenteval.testing._stats import InFlightTracker, RequestLog, outcome_counts
from pytest_agenteval.testing._think import split_choices, usage_details
from pytest_agenteval.testing._tokenize import add_tokenize_routes, char_tokens, decode_chars, token_id_prompt


def request_key(body: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of the whole body: messages/prompt, seed, sampling
    params, model. Retries of one request share a key; different generations do not."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def openai_error(
    status: int,
    message: str,
    type_: str,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> web.Response:
    payload = {"error": {"message": message, "type": type_, "param": None, "code": code}}
    return web.json_response(payload, status=status, headers=headers)


@dataclass
class _Attempt:
    """What one generation request did; becomes its log entry."""

    endpoint: str
    t: float  # wall-clock arrival
    start: float  # monotonic arrival
    key: str = ""
    seed: Any = None
    n: int = 1
    attempt: int | None = None
    outcome: str = "cancelled"  # overwritten unless the client vanished first
    model: str | None = None
    prompt: str = ""
    body: dict[str, Any] | None = None  # the whole request, kept with ServerConfig.log_bodies
    finished: bool = False
    client: str = ""  # the client's address and port: one per connection it used

    def entry(self) -> dict[str, Any]:
        return {
            "t": self.t,
            "key": self.key,
            "seed": self.seed,
            "outcome": self.outcome,
            "latency": time.monotonic() - self.start,
            "n": self.n,
            "attempt": self.attempt,
            "endpoint": self.endpoint,
            "client": self.client,
            "model": self.model,
            "prompt": self.prompt,
            **({"body": self.body} if self.body is not None else {}),
        }


def replies_identity(config: ServerConfig) -> str:
    """What decides the text of this server's replies, as a short digest: the model name,
    the answer or answers, the script (by its qualified name) and the reasoning split.
    Faults, latency and limits leave it alone: a flaky replica plays the same "weights"."""

    def named(value: Any) -> Any:
        if callable(value):
            qualname = getattr(value, "__qualname__", type(value).__qualname__)
            return f"{getattr(value, '__module__', '')}.{qualname}"
        if isinstance(value, re.Pattern):
            return value.pattern
        if isinstance(value, Mapping):
            return sorted((str(named(k)), str(named(v))) for k, v in value.items())
        return value

    parts = [config.model, config.answer, named(config.answers), named(config.script)]
    parts += [config.reasoning_parser, config.reasoning_field]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


class ServerCore:
    """State shared by the threaded, async and CLI front ends."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.identity = replies_identity(config)  # what /v1/models reports by default
        self.responder = config.responder()
        self.injector = FaultInjector(
            rate=config.fault_rate,
            mix=config.fault_kinds,
            seed=config.fault_seed,
            fail_first_k=config.fail_first_k_attempts_per_request,
            first_k_kind=config.fail_first_k_kind,
            plan=config.fault_plan,
        )
        self.tracker = InFlightTracker()
        self.rate_limit = ConcurrencyLimit(config.max_concurrent, config.retry_after)
        self.log = RequestLog(config.log_path)
        self.port: int | None = None
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._active: dict[asyncio.Task[Any], _Attempt] = {}
        self._ids = itertools.count(1)
        self.side_requests: dict[str, int] = {}  # tokenize calls, which are not generations
        self.batches = BatchService(config.batch, self.batch_reply, self._auth_error, request_key)
        self.billing = Billing() if config.billing else None  # a provider's books (_billing.py)

    max_model_len = 1 << 20  # what vLLM's /tokenize reports (a stand-in: its model's)

    # -- lifecycle -------------------------------------------------------------------
    async def start(self) -> str:
        app = web.Application(client_max_size=64 * 2**20)  # long multi-turn conversations
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/stats", self._stats)
        app.router.add_post("/stats/reset", self._reset)
        tokenizer = bill_ids if self.billing is not None else char_tokens
        add_tokenize_routes(app, self.config.tokenize, self.side_requests, tokenizer, self.max_model_len)
        self.batches.add_routes(app)
        self.add_routes(app)
        # handler_cancellation: a client that hangs up (timeout) ends its request's
        # in-flight time instead of leaving a handler sleeping on.
        self._runner = web.AppRunner(
            app,
            handler_cancellation=True,
            access_log=None,
            shutdown_timeout=self.config.shutdown_timeout,
        )
        await self._runner.setup()
        host = "127.0.0.1" if self.config.host == "localhost" else self.config.host
        # A deep backlog: 200 simultaneous connects must not overflow the accept queue
        # (dropped SYNs are retried after ~1 s and would wreck latency measurements).
        self._site = site = web.TCPSite(self._runner, host, self.config.port, backlog=2048)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self.url

    def add_routes(self, app: web.Application) -> None:
        """More routes of a server built on this one (the vLLM and SGLang stand-ins' /health)."""

    async def stop(self) -> None:
        if self._runner is None:
            return
        if self._site is not None:
            await self._site.stop()  # no new connections from here on
            self._site = None
        # Let ordinary requests finish, but not stalls (pointless to wait for); then
        # cancel what is left so stopping takes at most ``shutdown_timeout``.
        waiting = [t for t, rec in self._active.items() if rec.outcome not in ("stall", "stall_stream")]
        if waiting:
            await asyncio.wait(waiting, timeout=self.config.shutdown_timeout)
        leftover = [t for t in self._active if not t.done()]
        for task in leftover:
            task.cancel()
        await asyncio.gather(*leftover, return_exceptions=True)
        await self.batches.close()
        await self._runner.cleanup()
        self._runner = None
        self.log.close()

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.config.host == "localhost" else self.config.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}/v1"

    def stats(self) -> dict[str, Any]:
        entries = self.log.entries()
        return {
            "total_requests": len(entries),
            "outcomes": outcome_counts(entries),
            "unique_keys": len({e["key"] for e in entries}),
            "choices_served": sum(e["n"] for e in entries if e["outcome"] == "ok"),
            "connections": len({e["client"] for e in entries}),
            **self.tracker.snapshot(),
            **self.rate_limit.stats(),
            "batch": self.batches.stats(),
            **({"billed": self.billing.totals()} if self.billing is not None else {}),
        }

    def reset(self) -> None:
        self.log.clear()
        self.tracker.reset()
        self.injector.reset()
        self.rate_limit.reset()
        self.batches.reset()
        if self.billing is not None:
            self.billing.reset()

    # -- control endpoints -----------------------------------------------------------
    async def _models(self, request: web.Request) -> web.Response:
        denied = self._auth_error(request)
        if denied is not None:
            return denied
        model = {
            "id": self.config.model,
            "object": "model",
            "created": 0,
            "owned_by": "pytest-agenteval",
            **self.card(),
        }
        return web.json_response({"object": "list", "data": [model]})

    def card(self) -> dict[str, Any]:
        """The extra fields of the /v1/models entry: the configured ones, else the identity
        of what this server replies (`replies_identity`)."""
        if self.config.model_card is None:
            return {"root": f"pytest-agenteval-test-server/{self.identity}"}
        return dict(self.config.model_card)

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats())

    async def _reset(self, request: web.Request) -> web.Response:
        self.reset()
        return web.json_response({"ok": True})

    # -- generation ------------------------------------------------------------------
    def batch_reply(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """One request of a batch, as /v1/chat/completions answers it (no latency, no faults)."""
        error = self._validate(body, "chat")
        if error is not None:
            return error.status, json.loads(error.body)  # type: ignore[arg-type]
        rec = _Attempt(endpoint="chat", t=time.time(), start=time.monotonic(), key=request_key(body))
        rec.seed, rec.n = body.get("seed"), int(body.get("n") or 1) if self.config.support_n else 1
        return 200, self._payload(body, rec)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generation(request, "chat")

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generation(request, "completions")

    async def _generation(self, request: web.Request, endpoint: str) -> web.StreamResponse:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        client = ":".join(map(str, peer[:2])) if peer else ""
        rec = _Attempt(endpoint=endpoint, t=time.time(), start=time.monotonic(), client=client)
        task = asyncio.current_task()
        assert task is not None
        self._active[task] = rec
        self.tracker.enter()
        try:
            return await self._serve(request, rec)
        finally:  # also on CancelledError: the client hung up or the server is stopping
            self._finish(rec)
            del self._active[task]

    def _finish(self, rec: _Attempt) -> None:
        """Close the books on a request. Called *before* its last bytes go out, so a
        client that has its response always finds it in the log and stats."""
        if not rec.finished:
            rec.finished = True
            self.tracker.exit()
            self.rate_limit.leave(rec)
            self.log.append(rec.entry())

    async def _send(self, request: web.Request, resp: web.StreamResponse, rec: _Attempt) -> bool:
        """Send ``resp`` with ``rec.outcome`` already set; False if the client is gone.
        A failure after ``_finish`` (client vanished mid-write) keeps the logged outcome."""
        try:
            await resp.prepare(request)
            self._finish(rec)
            await resp.write_eof()
            return True
        except ConnectionError:
            if not rec.finished:
                rec.outcome = "cancelled"
            return False

    async def _serve(self, request: web.Request, rec: _Attempt) -> web.StreamResponse:
        raw = await request.read()
        body = _parse_body(raw)
        ids = token_id_prompt(body) if body is not None and self.config.tokenize == "vllm" else None
        if ids is not None:  # vLLM's token-id prompts, in the fixture's 1-token-a-char vocabulary
            body = {**body, "prompt": decode_chars(ids), "prompt_ids": ids}
        rec.key = request_key(body) if body is not None else hashlib.sha256(raw).hexdigest()
        if body is not None:
            rec.seed, rec.model = body.get("seed"), body.get("model")
            rec.prompt = last_user_text(body)[:200]
            if self.config.log_bodies:
                rec.body = body
        error = self._auth_error(request) or self._validate(body, rec.endpoint)
        if error is not None:
            rec.outcome = str(error.status)
            await self._send(request, error, rec)
            return error
        if not self.rate_limit.admit(rec):  # over max_concurrent: a 429 at once
            rec.outcome = "rate_limited"
            refusal = self.rate_limit.refusal()
            await self._send(request, refusal, rec)
            return refusal
        assert body is not None
        rec.n = int(body.get("n") or 1) if self.config.support_n else 1
        rec.attempt = self.injector.next_attempt(rec.key)
        fault = self.injector.decide(rec.key, rec.attempt, rec.endpoint, body)
        if fault == "stall_stream" and not (wants_stream(body) and self.config.support_stream):
            fault = "stall"  # nothing streams: the same silence, before any byte
        try:  # the model generates meanwhile (the latency, a stall)
            if fault == "stall":
                rec.outcome = "stall"  # logged as such even if the client gives up meanwhile
                await asyncio.sleep(self.config.stall_s)
                if self.config.stall_then == "close":
                    self._bill_unseen(body, rec)
                    return self._reset_connection(request, rec)
                fault = None
            else:
                await asyncio.sleep(self._delay_s(rec))
        except asyncio.CancelledError:  # the client hung up (its timeout): it is billed all the same
            if fault not in UNBILLED_FAULTS:
                with contextlib.suppress(Exception):
                    self._bill_unseen(body, rec)
            raise
        if fault == "stall_stream":
            rec.outcome = fault
            return await self._respond(request, body, rec)
        if fault is not None:
            rec.outcome = fault
            return await self._fault(request, fault, body, rec)
        return await self._respond(request, body, rec)

    def _delay_s(self, rec: _Attempt) -> float:
        cfg = self.config
        jitter = 0.0
        if cfg.jitter_ms:
            u = unit_draw(cfg.fault_seed, rec.key, rec.attempt or 0, "jitter")
            jitter = (2.0 * u - 1.0) * cfg.jitter_ms
        return max(0.0, cfg.latency_ms + jitter) / 1000.0

    async def _respond(self, request: web.Request, body: dict[str, Any], rec: _Attempt) -> web.StreamResponse:
        try:
            payload = self._payload(body, rec)
        except Exception as exc:  # a broken script must be loud, not a hang
            rec.outcome = "responder_error"
            error = openai_error(500, f"responder failed: {exc!r}", "server_error")
            await self._send(request, error, rec)
            return error
        if rec.outcome not in ("stall", "stall_stream"):  # a stall that finally answers stays one
            rec.outcome = "ok"
        if wants_stream(body):
            return await self._stream(request, payload, body, rec)
        resp = web.json_response(payload)
        await self._send(request, resp, rec)
        return resp

    async def _stream(
        self, request: web.Request, payload: dict[str, Any], body: dict[str, Any], rec: _Attempt
    ) -> web.StreamResponse:
        """The reply as server-sent events; `stall_stream` sends the first event, then
        nothing for `stall_s`, then drops the connection."""
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        events = list(sse_events(payload, body))
        try:
            await resp.prepare(request)
            if rec.outcome == "stall_stream":
                await resp.write(events[0])
                await asyncio.sleep(self.config.stall_s)
                return self._reset_connection(request, rec)
            if self.config.stream_delay_ms:
                for event in events[:-1]:
                    await resp.write(event)
                    await asyncio.sleep(self.config.stream_delay_ms / 1000.0)
            else:
                await resp.write(b"".join(events[:-1]))
            self._finish(rec)
            await resp.write(events[-1])
            await resp.write_eof()
        except ConnectionError:
            if not rec.finished:
                rec.outcome = "cancelled"
        return resp

    async def _fault(
        self, request: web.Request, kind: str, body: dict[str, Any], rec: _Attempt
    ) -> web.StreamResponse:
        if kind == "reset":
            self._bill_unseen(body, rec)
            return self._reset_connection(request, rec)
        if kind == "truncated":
            return self._truncated(request, body, rec)
        if kind == "429":
            retry = self.config.retry_after
            headers = {"Retry-After": retry} if retry is not None else None
            resp = openai_error(
                429,
                "Rate limit reached (injected fault).",
                "rate_limit_error",
                "rate_limit_exceeded",
                headers,
            )
        elif kind == "503":
            resp = openai_error(503, "The server is overloaded (injected fault).", "server_error")
        elif kind in ("502", "504"):  # a gateway's: the model behind it generated, its reply was lost
            self._bill_unseen(body, rec)
            resp = openai_error(int(kind), "The upstream server failed (injected fault).", "server_error")
        else:
            resp = openai_error(500, "The server had an error (injected fault).", "server_error")
        await self._send(request, resp, rec)
        return resp

    def _truncated(self, request: web.Request, body: dict[str, Any], rec: _Attempt) -> web.StreamResponse:
        # Raw bytes: aiohttp would not let us announce a length and then send less.
        payload = json.dumps(self._payload(body, rec)).encode()
        head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
        if self.config.truncate_declares_length:
            head += f"Content-Length: {len(payload)}\r\n"
        transport = request.transport
        self._finish(rec)
        if transport is not None and not transport.is_closing():
            transport.write(head.encode() + b"\r\n" + payload[: len(payload) // 2])
            transport.close()  # flushes what was written, then FIN
        return web.Response(status=500)  # never sent: the transport is closing

    def _bill_unseen(self, body: dict[str, Any], rec: _Attempt) -> None:
        """A billing server generated this reply before the connection went: bill it."""
        if self.billing is not None:
            self._payload(body, rec)

    def _reset_connection(self, request: web.Request, rec: _Attempt) -> web.StreamResponse:
        self._finish(rec)
        if request.transport is not None:
            request.transport.abort()  # RST-like: no response bytes at all
        return web.Response(status=500)  # never sent: the transport is gone

    def _auth_error(self, request: web.Request) -> web.Response | None:
        key = self.config.api_key
        if key is None or request.headers.get("Authorization") == f"Bearer {key}":
            return None
        return openai_error(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")

    def _validate(self, body: dict[str, Any] | None, endpoint: str) -> web.Response | None:
        problem = _body_problem(body, endpoint)
        if problem is not None:
            return openai_error(400, problem, "invalid_request_error")
        assert body is not None
        kind = (body.get("response_format") or {}).get("type") if endpoint == "chat" else None
        allowed = self.config.response_formats
        if kind is not None and allowed is not None and kind not in allowed:
            problem = f"response_format type {kind!r} is not supported"
            return openai_error(400, problem, "invalid_request_error")
        refusal = request_overflow(
            self.config.context_style, self.config.context_tokens, body, estimate_prompt_tokens(body)
        )
        if refusal is not None:  # over the context: the 400 the configured server sends
            return web.json_response(refusal, status=400)
        if wants_stream(body) and not self.config.support_stream:
            return openai_error(400, "stream is not supported by this server", "invalid_request_error")
        model = body.get("model")
        if self.config.strict_model and model != self.config.model:
            return openai_error(
                404,
                f"The model `{model}` does not exist",
                "invalid_request_error",
                "model_not_found",
            )
        return None

    def _payload(self, body: dict[str, Any], rec: _Attempt) -> dict[str, Any]:
        chat = rec.endpoint == "chat"
        replies = normalize_replies(self.responder(body))
        model = body.get("model") or self.config.model
        values = {"seed": rec.seed, "n": rec.n, "model": model}
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        native = tool_names(body) if chat else frozenset()
        choices, completion_tokens = [], 0
        for i in range(rec.n):
            choice, tokens = render_choice(
                replies[i % len(replies)],
                i,
                chat=chat,
                native_tools=native,
                max_tokens=max_tokens,
                values=values,
                call_id=f"call_{rec.key[:12]}_{i}",
            )
            choices.append(choice)
            completion_tokens += tokens
        reasoning_tokens = split_choices(choices, self.config)  # --reasoning-parser (_think.py)
        prompt_tokens = estimate_prompt_tokens(body)
        if "prompt_ids" in body:
            prompt_tokens = len(body["prompt_ids"])
            for choice in choices:  # vLLM's return_token_ids: the sampled ids, the end included
                end = "<|im_end|>" if choice["finish_reason"] == "stop" else ""
                choice["token_ids"] = char_tokens(choice["text"] + end)
                choice["prompt_token_ids"] = body["prompt_ids"]
        payload = {
            "id": f"{'chatcmpl' if chat else 'cmpl'}-mock{next(self._ids):06d}",
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": model,
            **({"system_fingerprint": fp} if (fp := self.config.system_fingerprint) is not None else {}),
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                **usage_details(reasoning_tokens, self.config),
            },
        }
        if self.billing is not None:  # usage by the server's own tokenizer, and on its books
            self.billing.bill(body, payload)
        return payload


def _parse_body(raw: bytes) -> dict[str, Any] | None:
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _body_problem(body: dict[str, Any] | None, endpoint: str) -> str | None:
    if body is None:
        return "We could not parse the JSON body of your request (expected a JSON object)."
    if endpoint == "chat":
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return "'messages' must be a non-empty list."
        if not all(isinstance(m, dict) and "role" in m for m in messages):
            return "every message needs a 'role'."
    else:
        prompt = body.get("prompt")
        single = isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str)
        if not (isinstance(prompt, str) or single):
            return "'prompt' must be a string (or a list holding one string)."
    for name in ("n", "max_tokens", "max_completion_tokens"):
        value = body.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            return f"'{name}' must be a positive integer."
    return None
