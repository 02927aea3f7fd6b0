"""Any OpenAI-compatible chat endpoint (vLLM, SGLang, llama.cpp, Ollama, OpenAI)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ._base import (
    Completion,
    FatalRequestError,
    Message,
    ModelIdentity,
    SamplerError,
    SamplingParams,
    ToolCall,
    approx_token_count,
    request_priority,
)
from ._counting import EndpointCounter, ServerChatTokenizer
from ._retry import FATAL_STATUS, RETRYABLE_STATUS, RetryPolicy, parse_retry_after
from ._slots import PrioritySlots
from ._template import ChatTokenizer


class _Retryable(Exception):
    def __init__(self, cause: str, retry_after: float | None = None) -> None:
        super().__init__(cause)
        self.cause = cause
        self.retry_after = retry_after


class OpenAISampler:
    """Chat completions over HTTP with per-endpoint concurrency, least-loaded balancing
    across endpoints, and bounded retries. The API key is read from the environment
    variable named by `api_key_env` and is never recorded."""

    supports_n = True  # `n` samples in one request (complete_n)

    def __init__(
        self,
        endpoints: Sequence[str],
        model_name: str,
        *,
        concurrency: int = 32,
        api_key_env: str = "OPENAI_API_KEY",
        request_timeout_s: float = 600.0,
        retry: RetryPolicy | None = None,
        native_tools: bool = True,
        extra_body: Mapping[str, Any] | None = None,
        tokenizer: ChatTokenizer | None = None,
        continuation: str = "messages",
        api_key: str | None = None,
        launched: Mapping[str, str] | None = None,
        fingerprint: str = "",
    ) -> None:
        self.endpoints = [url.rstrip("/") for url in endpoints]
        self.model_name = model_name
        self.concurrency = concurrency
        self.native_tools = native_tools
        self.request_timeout_s = request_timeout_s
        self.retry = retry or RetryPolicy()
        self.extra_body = dict(extra_body or {})
        self._api_key = api_key or os.environ.get(api_key_env) or None
        # servers this run launched (url -> log): a refused connection there means it died
        self.launched = {url.rstrip("/"): log for url, log in (launched or {}).items()}
        self._dead: set[str] = set()
        self.identity = ModelIdentity(
            backend="openai",
            name=model_name,
            # a launched server's port changes every run; its model identity does not
            location="launched" if self.launched else ",".join(self.endpoints),
            fingerprint=fingerprint,
            details={"api_key_env": api_key_env},
        )
        self._slots: PrioritySlots | None = None
        self._in_flight = Counter[str]()
        self._session: Any = None
        self._rng = random.Random(0)
        self._counts = Counter[str]()
        self.counter = EndpointCounter(self, tokenizer)
        # token-in/token-out: prompts as ids on /v1/completions (vLLM), rendered by /tokenize
        self.token_io = continuation == "tokens"
        self._local_tokenizer = tokenizer

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _ensure_session(self) -> Any:
        if self._session is None:
            import aiohttp

            limit = self.concurrency * len(self.endpoints) + 4
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=limit, limit_per_host=0),
                timeout=aiohttp.ClientTimeout(total=self.request_timeout_s),
            )
            self._slots = PrioritySlots(self.concurrency * len(self.endpoints))
        return self._session

    def body(
        self,
        messages: Sequence[Message],
        params: SamplingParams,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model_name,
            "messages": [dict(m) for m in messages],
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
            "seed": params.seed,
            **self.extra_body,
        }
        if params.top_k > 0:  # not an OpenAI field: only sent when asked for
            body["top_k"] = params.top_k
        if params.stop:
            body["stop"] = list(params.stop)
        if tools:
            body["tools"] = [dict(t) for t in tools]
            if tool_choice:
                body["tool_choice"] = tool_choice
        return body

    async def complete(
        self,
        messages: Sequence[Message],
        params: SamplingParams,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | None = None,
    ) -> Completion:
        """`tool_choice="none"`: the tools go into the chat template, the calls come back
        as raw text (no server-side tool parser needed, e.g. plain `vllm serve`)."""
        return (await self._request(self.body(messages, params, tools, tool_choice)))[0]

    def chat_tokenizer(self) -> Any:
        """The template and tokenizer continuation renders with: `--tokenizer`, else the
        server's own (`/tokenize` with messages)."""
        return self._local_tokenizer or ServerChatTokenizer(self.counter)

    async def complete_tokens(self, prompt: Sequence[int], params: SamplingParams) -> Completion:
        """Sample from token ids (vLLM `/v1/completions`, `prompt=[ids]`); the sampled ids
        come back with `return_token_ids`."""
        body: dict[str, Any] = {
            "model": self.model_name,
            "prompt": list(prompt),
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
            "seed": params.seed,
            "return_token_ids": True,  # the sampled ids, the end-of-sequence id included
            **{k: v for k, v in self.extra_body.items() if k != "chat_template_kwargs"},
        }
        if params.top_k > 0:
            body["top_k"] = params.top_k
        if params.stop:
            body["stop"] = list(params.stop)
        (completion,) = (await self._request(body, "completions"))[:1]
        if not completion.token_ids and completion.completion_tokens:
            raise FatalRequestError(
                f"{self.endpoints[0]}/completions returned no token_ids (return_token_ids needs "
                "vLLM >= 0.10.2); use --continuation messages"
            )
        return completion

    async def complete_n(
        self, messages: Sequence[Message], params: SamplingParams, n: int
    ) -> list[Completion]:
        """n samples in one request (`n`), all under the request's seed. A server that
        ignores `n` gets the missing samples as single requests with seeds seed+1, ..."""
        body = {**self.body(messages, params), "n": n}
        completions = await self._request(body)
        self._counts["n_requests"] += 1
        for extra in range(len(completions), n):
            self._counts["n_unsupported_fallbacks"] += 1
            single = SamplingParams(**{**params.as_dict(), "stop": params.stop, "seed": params.seed + extra})
            completions.append(await self.complete(messages, single))
        return completions[:n]

    async def _request(self, body: dict[str, Any], route: str = "chat/completions") -> list[Completion]:
        session = self._ensure_session()
        assert self._slots is not None
        priority = request_priority.get()
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            async with self._slots.slot(priority):
                endpoint = self._pick_endpoint()
                self._in_flight[endpoint] += 1
                try:
                    self._counts["requests"] += 1
                    data = await self._post(session, endpoint, body, route)
                    completions = _parse_completions(data, time.monotonic() - started, attempt)
                    self._counts["ok"] += 1
                    return completions
                except _Retryable as exc:
                    failure = exc
                finally:
                    self._in_flight[endpoint] -= 1
            if failure.cause == "connection" and self._launched_dead(endpoint):
                attempt -= 1  # drained: the other replicas take the request at once
                continue
            wait = self.retry.delay(attempt, failure.retry_after, self._rng)
            if not self.retry.should_retry(attempt, started, wait):
                self._counts[f"gave_up_{failure.cause}"] += 1
                raise SamplerError(
                    f"{endpoint}: gave up after {attempt} attempts "
                    f"({time.monotonic() - started:.1f} s); last error: {failure.cause}"
                )
            self._counts["retries"] += 1
            self._counts[f"retry_{failure.cause}"] += 1
            await asyncio.sleep(wait)

    def _pick_endpoint(self) -> str:
        """The least-loaded live endpoint; when every launched server is dead, an error
        at once (with the logs) instead of minutes of retries."""
        live = [url for url in self.endpoints if url not in self._dead]
        if not live:
            logs = ", ".join(self.launched[url] for url in self.endpoints if url in self.launched)
            raise SamplerError(f"the launched server died (connection refused); its log: {logs}")
        return min(live, key=lambda url: self._in_flight[url])

    def _launched_dead(self, endpoint: str) -> bool:
        """A launched loopback server that refuses connections has exited: drain it."""
        if endpoint not in self.launched:
            return False
        if endpoint not in self._dead:
            from urllib.parse import urlsplit

            parts = urlsplit(endpoint)
            try:
                socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=2).close()
                return False
            except OSError:
                self._dead.add(endpoint)
                self._counts["launched_server_died"] += 1
        return True

    async def _post(self, session: Any, endpoint: str, body: dict[str, Any], route: str) -> dict[str, Any]:
        import aiohttp

        url = f"{endpoint}/{route}"
        try:
            async with session.post(url, json=body, headers=self._headers()) as response:
                raw = await response.read()
                status = response.status
                retry_after = parse_retry_after(response.headers.get("Retry-After"))
        except asyncio.TimeoutError as exc:
            raise _Retryable("timeout") from exc
        except (aiohttp.ClientError, ConnectionError, OSError) as exc:
            raise _Retryable("connection") from exc
        if status in FATAL_STATUS:
            self._counts[f"fatal_{status}"] += 1
            raise FatalRequestError(f"{url}: HTTP {status}: {_error_message(raw)}")
        if status in RETRYABLE_STATUS or status >= 500:
            raise _Retryable(str(status), retry_after)
        if status >= 400:
            raise FatalRequestError(f"{url}: HTTP {status}: {_error_message(raw)}")
        try:
            return json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise _Retryable("bad_json") from exc

    def count_tokens(self, text: str) -> int:
        return approx_token_count(text)

    def stats(self) -> dict[str, Any]:
        return dict(sorted(self._counts.items()))

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet answered, over all endpoints."""
        return sum(self._in_flight.values())

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _error_message(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace").strip()
    try:
        payload = json.loads(text)
        error = payload.get("error", payload)
        if isinstance(error, Mapping):
            return str(error.get("message") or error)
        return str(error)
    except (json.JSONDecodeError, AttributeError):
        return text[:200] or "(empty body)"


def _parse_completions(data: Mapping[str, Any], latency: float, attempts: int) -> list[Completion]:
    """Every choice; the request's attempts are counted once, on the first."""
    try:
        choices = sorted(data["choices"], key=lambda c: c.get("index", 0))
        if not choices:
            raise IndexError("no choices")
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise _Retryable("bad_json") from exc
    usage = data.get("usage") or {}
    return [
        _parse_choice(choice, usage if i == 0 else {}, latency, attempts if i == 0 else 0)
        for i, choice in enumerate(choices)
    ]


def _parse_choice(
    choice: Mapping[str, Any], usage: Mapping[str, Any], latency: float, attempts: int
) -> Completion:
    if not isinstance(choice, Mapping):
        raise _Retryable("bad_json")
    message = choice.get("message") or {"content": choice.get("text")}  # chat, or completions
    calls = tuple(
        ToolCall(
            name=(call.get("function") or {}).get("name", ""),
            arguments=(call.get("function") or {}).get("arguments") or "",
            id=call.get("id", ""),
        )
        for call in message.get("tool_calls") or ()
    )
    return Completion(
        text=message.get("content") or "",
        finish_reason=choice.get("finish_reason") or "stop",
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        tool_calls=calls,
        latency_s=latency,
        attempts=attempts,
        token_ids=tuple(int(t) for t in choice.get("token_ids") or ()),
    )
