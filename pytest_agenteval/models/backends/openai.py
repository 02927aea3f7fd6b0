# One concept, over 500 lines: one OpenAI-compatible endpoint (requests, streams, n, retries)
"""Any OpenAI-compatible chat endpoint (vLLM, SGLang, llama.cpp, Ollama, OpenAI)."""

from __future__ import annotations

import asyncio
import functools
import json
import random
import socket
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from pytest_agenteval.api.sampler import (
    Completion,
    ContextOverflowError,
    FatalRequestError,
    Message,
    ModelIdentity,
    SamplerError,
    SamplingParams,
    approx_token_count,
    note_served,
    note_server_wait,
    request_priority,
)
from pytest_agenteval.models.cost.meter import current_meter
from pytest_agenteval.models.http.aimd import says_overloaded
from pytest_agenteval.models.http.client import HttpClient, IdleTimeout, InvalidRequest, NotSent
from pytest_agenteval.models.http.health import EndpointHealth
from pytest_agenteval.models.http.overflow import context_overflow
from pytest_agenteval.models.http.replies import Retryable, error_message, parse_completions
from pytest_agenteval.models.http.retry import FATAL_STATUS, RETRYABLE_STATUS, RetryPolicy, parse_retry_after
from pytest_agenteval.models.http.slots import EndpointSlots
from pytest_agenteval.models.http.stream import StreamError, StreamInterrupted, read_stream
from pytest_agenteval.models.keys import api_key_from_env
from pytest_agenteval.models.reasoning import ThinkSplit
from pytest_agenteval.models.tokens.counting import EndpointCounter, ServerChatTokenizer
from pytest_agenteval.models.tokens.template import ChatTokenizer

# Retry causes that say the endpoint is unwell (for the circuit breaker); 429 is not one.
UNHEALTHY = frozenset({"connection", "timeout", "stall", "deadline", "bad_json", "truncated"})
STALLS = ("stall", "deadline", "timeout")  # idle stream, max_tokens deadline, --request-timeout
STALL_NAMES = {"stall": "idle", "deadline": "deadline", "timeout": "request_timeout"}
# Statuses that turn a request away before the model generates (rate limit, overload): the
# budget releases such an attempt; any other 5xx is settled at its worst case (meter.py).
UNBILLED_STATUS = frozenset({429, 503, 529})


class OpenAISampler:
    """Chat completions over HTTP with per-endpoint concurrency, least-loaded balancing
    across endpoints, and bounded retries. The API key is read from the environment
    variable named by `api_key_env` and is never recorded."""

    supports_n = True  # `n` samples in one request (complete_n)
    meters_attempts = True  # under a budget, each HTTP attempt is reserved and settled here
    records_served = False  # the run's model (not a judge): each reply's model goes to its record

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
        stream: bool = True,
        idle_timeout_s: float = 60.0,
        adaptive_start: int | None = None,
        think: ThinkSplit | None = None,
        awaiting: Callable[[], Awaitable[Mapping[str, Any]]] | None = None,
    ) -> None:
        self.endpoints = [url.rstrip("/") for url in endpoints]
        # a sweep's later-wave server (models/serve/handoff.py): its endpoints, key and logs
        # arrive when it is up; everything else (the cache key included) is known now
        self._awaiting = awaiting
        self._connecting: asyncio.Lock | None = None
        self._connect_error: str | None = None
        self.model_name = model_name
        self.concurrency = concurrency
        self.adaptive_start = adaptive_start  # --concurrency auto: AIMD from here up to concurrency
        self.native_tools = native_tools
        self.request_timeout_s = request_timeout_s
        self.retry = retry or RetryPolicy()
        self.extra_body = dict(extra_body or {})
        self._api_key = api_key or api_key_from_env(api_key_env)  # stripped; ApiKeyError: one line
        # servers this run launched (url -> log): a refused connection there means it died
        self.launched = {url.rstrip("/"): log for url, log in (launched or {}).items()}
        self._dead: set[str] = set()
        self.identity = ModelIdentity(
            backend="openai",
            name=model_name,
            # a launched server's port changes every run; its model identity does not
            location="launched" if self.launched or awaiting else ",".join(self.endpoints),
            fingerprint=fingerprint,
            details={"api_key_env": api_key_env},
        )
        self._slots: EndpointSlots | None = None  # --concurrency on each endpoint
        self._in_flight = Counter[str]()
        self._session: HttpClient | None = None
        self._rng = random.Random(0)
        self._counts = Counter[str]()
        self.counter = EndpointCounter(self, tokenizer)
        # token-in/token-out: prompts as ids on /v1/completions (vLLM), rendered by /tokenize
        self.token_io = continuation == "tokens"
        self._local_tokenizer = tokenizer
        # SSE with an idle timeout where the endpoint streams; else a max_tokens deadline
        self.stream = stream
        self.idle_timeout_s = idle_timeout_s
        self._no_stream: set[str] = set()  # endpoints that refused `stream: true`
        self.health = EndpointHealth(self.endpoints)
        # splits each reply into reasoning and answer (models/reasoning.py); the run's
        # --think-tags and --thinking are set by make_sampler, a judge keeps the defaults
        self.think = think or ThinkSplit()

    async def connect(self) -> None:
        """A later wave's server: wait until it is up, then send there. Once."""
        if self._awaiting is None:
            return
        if self._connect_error is not None:
            raise SamplerError(self._connect_error)
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        waiting = time.monotonic()
        try:
            await self._connect(self._connecting)
        finally:  # the wait for the server is not the generation's latency
            note_server_wait(time.monotonic() - waiting)

    async def _connect(self, lock: asyncio.Lock) -> None:
        async with lock:
            if self._awaiting is None:
                return
            if self._connect_error is not None:
                raise SamplerError(self._connect_error)
            try:
                data = await self._awaiting()
            except SamplerError as exc:
                self._connect_error = str(exc)
                raise
            self.endpoints = [str(url).rstrip("/") for url in data.get("endpoints") or ()]
            self._api_key = data.get("key") or self._api_key
            logs = (data.get("served") or {}).get("logs") or {}
            self.launched = {str(url).rstrip("/"): str(log) for url, log in logs.items()}
            self.health = EndpointHealth(self.endpoints)
            self._awaiting = None

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _ensure_session(self) -> HttpClient:
        if self._session is None:
            self._session = HttpClient()
            self._slots = self.shared_slots()
        return self._session

    def shared_slots(self) -> EndpointSlots:
        """This sampler's `--concurrency` slots on each endpoint, for another sampler of the
        same endpoints to share (a judge on the run's own endpoint)."""
        if self._slots is None:
            self._slots = EndpointSlots(self.endpoints, self.concurrency, self.adaptive_start)
        return self._slots

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
        if params.presence_penalty:  # 0 is the OpenAI default: not sent
            body["presence_penalty"] = params.presence_penalty
        if params.stop:
            body["stop"] = list(params.stop)
        if params.json_schema and "response_format" not in body:  # extra_body's own wins
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "reply", "strict": True, "schema": json.loads(params.json_schema)},
            }
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
        if params.presence_penalty:
            body["presence_penalty"] = params.presence_penalty
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
        """Send with retries; endpoints out of the rotation are skipped, a retry after an
        endpoint's failure goes to another one at once, and when every endpoint has been
        down past the retry budget the request fails without waiting it out."""
        if self._awaiting is not None:
            await self.connect()
        session = self._ensure_session()
        assert self._slots is not None
        priority = request_priority.get()
        started = time.monotonic()
        attempt, avoid = 0, None
        meter = current_meter()  # the budget's (models/cost/meter.py): every attempt settled
        prompt = await meter.bound(self.counter, self.model_name, body) if meter is not None else None
        while True:
            slots = self._slots
            hold = await meter.reserve(prompt, body) if meter is not None and prompt is not None else None
            try:
                endpoint, wait = await slots.acquire(priority, functools.partial(self._pick_endpoint, avoid))
            except BaseException:
                self._unsent(meter, hold)
                raise
            if endpoint is None:
                self._unsent(meter, hold)
            else:
                attempt += 1
                self._in_flight[endpoint] += 1
                sent, outcome = time.monotonic(), None  # the outcome tells auto's limit
                try:
                    self._counts["requests"] += 1
                    data = await self._post(session, endpoint, body, route)
                    if meter is not None:
                        meter.answered(hold, data.get("usage") if isinstance(data, dict) else None)
                        hold = None
                    completions = parse_completions(data, time.monotonic() - started, attempt)
                    completions = [self.reasoning_split(c) for c in completions]  # text: the answer
                    if self.records_served:
                        note_served(completions[0])
                    self._counts["ok"] += 1
                    outcome = "ok"
                    self._observe(endpoint, completions, time.monotonic() - sent)
                    return completions
                except Retryable as exc:
                    failure, outcome = exc, exc.cause
                    self._note_failure(endpoint, exc.cause)
                    if not exc.sent:
                        self._unsent(meter, hold)
                        hold = None
                except (FatalRequestError, ContextOverflowError) as exc:
                    self.health.succeeded(endpoint)  # it answered: alive
                    self._unsent(meter, hold)  # refused with a status: nothing generated
                    hold = None
                    if isinstance(exc, ContextOverflowError):
                        exc.attempts = attempt  # sent: counted in the run's requests
                    raise
                finally:
                    if meter is not None and hold is not None:  # no usage came back: maybe billed
                        meter.maybe_billed(hold)
                    self._in_flight[endpoint] -= 1
                    self.health.release(endpoint)  # a probe cancelled or raising: free it
                    slots.release(endpoint, outcome, sent)
            if endpoint is None:  # every endpoint is out of the rotation
                self._check_outage()
                await asyncio.sleep(wait)
                continue
            if failure.cause == "connection" and self._launched_dead(endpoint):
                attempt -= 1  # drained: the other replicas take the request at once
                continue
            self._check_outage(failure.cause)
            avoid = endpoint
            wait = self.retry.delay(attempt, failure.retry_after, self._rng)
            if failure.cause in (*STALLS, "stream_interrupted") or (
                failure.cause != "429" and self.health.healthy_other_than(endpoint)
            ):
                wait = 0.0  # the stall was the wait; or another endpoint takes it now
            if not self.retry.should_retry(attempt, started, wait):
                self._counts[f"gave_up_{failure.cause}"] += 1
                raise SamplerError(
                    f"{endpoint}: gave up after {attempt} attempts "
                    f"({time.monotonic() - started:.1f} s); last error: {failure.cause}"
                )
            self._counts["retries"] += 1
            self._counts[f"retry_{failure.cause}"] += 1
            await asyncio.sleep(wait)

    @staticmethod
    def _unsent(meter: Any, hold: Any) -> None:
        if meter is not None and hold is not None:
            meter.unsent(hold)

    def _pick_endpoint(
        self, avoid: str | None, in_use: Mapping[str, int], full: frozenset[str]
    ) -> tuple[str | None, float | None]:
        """The health's pick among the endpoints with a free slot (`in_use`: requests in
        flight on each, over every sampler sharing the slots); when every launched server
        is dead, an error at once (with the logs) instead of minutes of retries."""
        if self._dead and self.health.all_retired():
            logs = ", ".join(self.launched[url] for url in self.endpoints if url in self.launched)
            raise SamplerError(f"the launched server died (connection refused); its log: {logs}")
        return self.health.pick(in_use, avoid, full)

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
                self.health.retire(endpoint)
                self._counts["launched_server_died"] += 1
        return True

    def _note_failure(self, endpoint: str, cause: str) -> None:
        if cause in STALLS:
            self._counts[f"stalls_{STALL_NAMES[cause]}"] += 1
        if cause in UNHEALTHY or cause.isdigit() and int(cause) >= 500:
            self.health.failed(endpoint)
        else:
            self.health.neutral(endpoint)

    def _check_outage(self, cause: str | None = None) -> None:
        """Every endpoint down for longer than a request may retry: fail now, with one line."""
        down = self.health.all_down_for()
        if down and down >= self.retry.max_total_s:
            self._counts["gave_up_all_down"] += 1
            last = f"; last error: {cause}" if cause else ""
            raise SamplerError(
                f"every endpoint is down ({', '.join(self.endpoints)}) for {down:.1f} s, past the "
                f"retry budget of {self.retry.max_total_s:g} s (--retry-max-seconds){last}"
            )

    def _observe(self, endpoint: str, completions: Sequence[Completion], seconds: float) -> None:
        usage = completions[0].request_usage  # n > 1: the request's one total
        tokens = usage["completion_tokens"] if usage else (completions[0].completion_tokens or 0)
        self.health.succeeded(endpoint, tokens / max(1, len(completions)), seconds)

    def _streams(self, endpoint: str, body: Mapping[str, Any]) -> bool:
        # token ids come back whole only without streaming
        return self.stream and endpoint not in self._no_stream and "return_token_ids" not in body

    async def _post(
        self, session: HttpClient, endpoint: str, body: dict[str, Any], route: str
    ) -> dict[str, Any]:
        url = f"{endpoint}/{route}"
        streaming = self._streams(endpoint, body)
        if streaming:  # silence between chunks is the stall signal
            sent = {**body, "stream": True, "stream_options": {"include_usage": True}}
            timeout, idle = self.request_timeout_s, self.idle_timeout_s
            cause = "stall"
        else:  # no chunks to watch: a deadline from max_tokens and the endpoint's throughput
            sent, idle = body, None
            limit = self.health.deadline(endpoint, int(body.get("max_tokens") or 0), self.idle_timeout_s)
            deadline = limit is not None and limit < self.request_timeout_s
            timeout = limit if deadline else self.request_timeout_s
            cause = "deadline" if deadline else "timeout"
        try:
            async with await session.post(url, sent, self._headers(), timeout=timeout, idle=idle) as response:
                status = response.status
                retry_after = parse_retry_after(response.headers.get("retry-after"))
                events = response.content_type == "text/event-stream"
                if status == 200 and events:
                    data = await read_stream(response.lines())
                    await response.drain()  # the body's end after [DONE]: keep the connection
                    return data
                raw = await response.read()
        except IdleTimeout as exc:  # nothing for idle_timeout_s
            raise Retryable("stall") from exc
        except InvalidRequest as exc:  # never sent (a control character in the API key)
            raise FatalRequestError(f"{url}: {exc}") from exc
        except asyncio.TimeoutError as exc:  # the whole request's time
            raise Retryable("timeout" if streaming else cause) from exc
        except StreamInterrupted as exc:  # cut short by the server: it gets deadlines instead
            self._no_stream.add(endpoint)
            raise Retryable("stream_interrupted") from exc
        except (StreamError, ValueError) as exc:  # ValueError: a line past MAX_LINE
            raise Retryable("truncated") from exc
        except NotSent as exc:  # refused, or no TLS: the request never reached the server
            raise Retryable("connection", sent=False) from exc
        except (ConnectionError, OSError) as exc:  # HttpError is one
            raise Retryable("connection") from exc
        overflow = context_overflow(status, raw, url)
        if overflow is not None:  # the prompt outgrew the context: a typed error, never retried
            self._counts["context_overflow"] += 1
            raise overflow
        if streaming and status in (400, 422) and "stream" in error_message(raw).lower():
            self._no_stream.add(endpoint)  # refuses SSE: from now on, deadlines instead
            self._counts["stream_refused"] += 1
            self._counts["requests"] += 1  # the refused one was sent too
            return await self._post(session, endpoint, body, route)
        if says_overloaded(status, raw):  # a 400 or 500 saying the server is overloaded
            raise Retryable("overloaded", retry_after, sent=False)
        if status in FATAL_STATUS:
            self._counts[f"fatal_{status}"] += 1
            raise FatalRequestError(f"{url}: HTTP {status}: {error_message(raw)}")
        if status in RETRYABLE_STATUS or status >= 500:
            # 429, 503, 529 and the 4xx say the request was turned away before any generation:
            # not billed; a 500, 502, 504 (a gateway's) may come after the model generated
            raise Retryable(str(status), retry_after, sent=status not in UNBILLED_STATUS and status >= 500)
        if status >= 400:
            raise FatalRequestError(f"{url}: HTTP {status}: {error_message(raw)}")
        try:
            return json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise Retryable("bad_json") from exc

    def reasoning_split(self, completion: Completion) -> Completion:
        """The reply's reasoning apart from its answer: the server's reasoning_content where
        its parser split it, think tags in the content otherwise (or as well)."""
        return self.think.apply(completion)

    def count_tokens(self, text: str) -> int:
        return approx_token_count(text)

    def stats(self) -> dict[str, Any]:
        http = self._session.counts if self._session is not None else Counter[str]()
        stats: dict[str, Any] = dict(sorted((self._counts + self.health.counts + http).items()))
        if self._slots is not None and self._slots.adaptive:  # --concurrency auto: its limits
            stats["concurrency"] = self._slots.report()
        return stats

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet answered, over all endpoints."""
        return sum(self._in_flight.values())

    async def aclose(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            self._counts.update(session.counts)  # its stale-connection retries outlive it
            await session.close()
