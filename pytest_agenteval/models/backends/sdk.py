"""Samplers behind a vendor SDK whose sampling client takes token ids (`trio://` PyTRIO,
`tinker://` Tinker): the prompt is rendered here with the model's tokenizer and chat
template, sampled as ids, and the text decoded from the sampled ids, so retool continues
token-in/token-out exactly as the ReTool lab's rollout does.

One SDK session per process (the SDK clients carry the key; xdist workers each build their
own, nothing is pickled), closed at the end. The SDK retries HTTP faults itself; we do not
retry on top of that, except for a request that stalls past `--request-timeout`, which the
SDKs would wait on for hours. Keys come only from the SDKs' own environment variables."""

from __future__ import annotations

import asyncio
import copy
import os
import random
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agenteval.api.sampler import (
    Completion,
    ContextOverflowError,
    FatalRequestError,
    Message,
    ModelIdentity,
    SamplerError,
    SamplingParams,
    request_priority,
)
from pytest_agenteval.models.cost.meter import current_meter
from pytest_agenteval.models.cost.prompt_bound import TOKEN_IDS, PromptBound
from pytest_agenteval.models.http.overflow import context_overflow
from pytest_agenteval.models.http.retry import RetryPolicy
from pytest_agenteval.models.http.slots import PrioritySlots
from pytest_agenteval.models.keys import ApiKeyError, api_key_from_env
from pytest_agenteval.models.reasoning import ThinkSplit
from pytest_agenteval.models.schemes import StartupError, checkpoint_of
from pytest_agenteval.models.tokens.template import ChatTokenizer


@dataclass
class Session:
    """What one process holds for one (scheme, base model, checkpoint)."""

    service: Any
    sampling: Any
    tokenizer: ChatTokenizer
    max_in_flight: int  # the SDK's own cap on sample requests in flight


def hf_chat_tokenizer(tokenizer: Any, label: str) -> ChatTokenizer:
    """A transformers tokenizer (the SDK's `get_tokenizer()`) behind our renderer, which
    follows `apply_chat_template` (tools, --thinking) and keeps special tokens."""
    template = getattr(tokenizer, "chat_template", None)
    if not template:
        raise StartupError(f"{label} has no chat template; pass --tokenizer PATH with one")
    return ChatTokenizer(
        template,
        lambda text: list(tokenizer.encode(text, add_special_tokens=False)),
        lambda ids: tokenizer.decode(list(ids), skip_special_tokens=True),
        bos_token=getattr(tokenizer, "bos_token", None) or "",
        eos_token=getattr(tokenizer, "eos_token", None) or "",
        label=label,
    )


_sessions: dict[tuple[str, str, str | None], tuple[Any, Session]] = {}  # key -> (adapter, session)
_sessions_lock = threading.Lock()


def open_session(adapter: Any, settings: Any, home: Path | None) -> Session:
    """This process's session for these options, opened on first use (start-up check and
    sampler share it in a single process). Raises StartupError with one line."""
    key = (adapter.scheme, str(settings.base_model), checkpoint_of(settings.model_path))
    with _sessions_lock:
        if key not in _sessions:
            folder = home or _temporary_home(adapter.scheme)
            folder.mkdir(parents=True, exist_ok=True)
            _sessions[key] = (adapter, adapter.connect(settings, folder))
        return _sessions[key][1]


def _temporary_home(scheme: str) -> Path:
    """The SDK's home where no cache folder is in use (--agenteval-no-cache): private to
    this process (mode 0700) and removed at exit."""
    import atexit
    import shutil

    folder = Path(tempfile.mkdtemp(prefix=f"agenteval-{scheme}-home-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


_ending = {"status": "ENDED"}


def mark_interrupted() -> None:
    """Ctrl-C: the sessions still open end as CANCELLED rather than ENDED. With none open
    there is nothing to cancel: a later session of this process (pytest.main again) still
    ends normally."""
    with _sessions_lock:
        if _sessions:
            _ending["status"] = "CANCELLED"


def close_sessions(status: str | None = None) -> None:
    """End every session this process opened (at the end of the run, Ctrl-C included)."""
    status = status or _ending["status"]
    with _sessions_lock:
        sessions = list(_sessions.items())
        _sessions.clear()
    for _, (adapter, session) in sessions:
        adapter.close(session, status)
    _ending["status"] = "ENDED"  # a later session in this process (pytest.main again) ends normally


class SdkSampler:
    """The Sampler interface over an SDK adapter (see `trio.py`)."""

    native_tools = False
    token_io = True  # complete_tokens: TokenConversation continues from the sampled ids
    supports_n = True  # complete_n: one request with num_samples = n
    meters_attempts = True  # under a budget, each sample call is reserved and settled here

    def __init__(self, adapter: Any, settings: Any, concurrency: int, home: Path | None = None) -> None:
        self.adapter = adapter
        self.settings = settings
        self.concurrency = concurrency
        self.home = home
        self.retry = RetryPolicy(max_attempts=settings.max_attempts, max_total_s=settings.retry_max_seconds)
        self.request_timeout_s = settings.request_timeout
        self._session: Session | None = None
        self._slots: PrioritySlots | None = None
        self._counts = Counter[str]()
        self._sends_before = 0  # the process's sample sends when this sampler's session opened
        self._in_flight = 0
        self._rng = random.Random(0)
        self.think = ThinkSplit.from_settings(settings)  # --think-tags and --thinking as given
        self._split: ThinkSplit | None = None  # with the template's tags (reasoning_split)
        self._tokenizer: ChatTokenizer | None = None  # the session's, rendering with --thinking
        checkpoint = checkpoint_of(settings.model_path)
        self.identity = ModelIdentity(
            backend=adapter.scheme,
            name=checkpoint or str(settings.base_model),
            location=adapter.base_url(),
            details={
                "base_model": settings.base_model,
                "model_path": checkpoint,
                "api_key_env": adapter.key_env,
            },
        )

    def session(self) -> Session:
        if self._session is None:
            self._session = open_session(self.adapter, self.settings, self.home)
            self._sends_before = self.adapter.sample_sends()  # an earlier session's sends are not ours
            # our share of --concurrency, never above what the SDK itself lets through
            self._slots = PrioritySlots(max(1, min(self.concurrency, self._session.max_in_flight)))
        return self._session

    def chat_tokenizer(self) -> ChatTokenizer:
        if self._tokenizer is None:  # a copy: the session's is shared (and tokenizer_from_file's cached)
            tokenizer = copy.copy(self.session().tokenizer)
            tokenizer.enable_thinking = self.think.enable_thinking
            self._split = self.think.with_template(tokenizer.template)
            self._tokenizer = tokenizer
        return self._tokenizer

    def reasoning_split(self, completion: Completion) -> Completion:
        """The decoded reply's reasoning apart from its answer, by the chat template's think
        tags (--think-tags over them), the reasoning's tokens counted by the tokenizer."""
        self.chat_tokenizer()
        assert self._split is not None
        return self._split.apply(completion, self.count_tokens)

    async def complete(
        self,
        messages: Sequence[Message],
        params: SamplingParams,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | None = None,
    ) -> Completion:
        """Render with the model's chat template (tools in it; calls come back as raw text)."""
        prompt = self.chat_tokenizer().render([dict(m) for m in messages], tools, True)
        return (await self._sample(prompt, params, 1))[0]

    async def complete_tokens(self, prompt: Sequence[int], params: SamplingParams) -> Completion:
        return (await self._sample(list(prompt), params, 1))[0]

    async def complete_n(
        self, messages: Sequence[Message], params: SamplingParams, n: int
    ) -> list[Completion]:
        """n samples in one request (`num_samples=n`) under the request's seed."""
        prompt = self.chat_tokenizer().render([dict(m) for m in messages], None, True)
        self._counts["n_requests"] += 1
        return await self._sample(prompt, params, n)

    async def _sample(self, prompt: list[int], params: SamplingParams, n: int) -> list[Completion]:
        session = self.session()
        assert self._slots is not None
        started = time.monotonic()
        attempt = 0
        meter = current_meter()  # the budget's (models/cost/meter.py): every attempt settled
        bound = PromptBound(len(prompt), TOKEN_IDS)  # rendered here: the ids are the prompt
        while True:
            attempt += 1
            body = {"n": n, "max_tokens": params.max_tokens}
            hold = await meter.reserve(bound, body) if meter is not None else None
            try:
                async with self._slots.slot(request_priority.get()):
                    self._counts["requests"] += 1
                    self._in_flight += 1
                    try:
                        sequences = await asyncio.wait_for(
                            self.adapter.sample(session, prompt, params, n), self.request_timeout_s
                        )
                        self._counts["ok"] += 1
                        if meter is not None:
                            completion = sum(len(tokens) for tokens, _ in sequences)
                            meter.answered(
                                hold, {"prompt_tokens": len(prompt), "completion_tokens": completion}
                            )
                            hold = None
                        break
                    except asyncio.TimeoutError:
                        cause = "stall"  # sent, maybe generated: settled at its worst case below
                    except Exception as exc:  # noqa: BLE001 - the SDK gave up after its own retries
                        failure = self._failure(exc)
                        if meter is not None and self._turned_away(exc, failure):
                            meter.unsent(hold)  # refused before any generation: nothing billed
                            hold = None
                        raise failure from None
                    finally:
                        self._in_flight -= 1
            finally:
                if meter is not None and hold is not None:  # no usage came back: maybe billed
                    meter.maybe_billed(hold)
            wait = self.retry.delay(attempt, None, self._rng)
            if not self.retry.should_retry(attempt, started, wait):
                self._counts[f"gave_up_{cause}"] += 1
                raise SamplerError(
                    f"{self.adapter.scheme}: gave up after {attempt} attempts "
                    f"({time.monotonic() - started:.1f} s); last error: "
                    f"no answer in {self.request_timeout_s} s"
                )
            self._counts["retries"] += 1
            self._counts[f"retry_{cause}"] += 1
            await asyncio.sleep(wait)
        latency = time.monotonic() - started
        decode = session.tokenizer.decode
        return [
            self.reasoning_split(
                Completion(
                    text=decode(tokens),
                    finish_reason="length" if reason == "length" else "stop",
                    prompt_tokens=len(prompt) if index == 0 else 0,
                    completion_tokens=len(tokens),
                    latency_s=latency,
                    attempts=attempt if index == 0 else 0,
                    token_ids=tuple(tokens),
                )
            )
            for index, (tokens, reason) in enumerate(sequences)
        ]

    def _turned_away(self, exc: BaseException, failure: SamplerError) -> bool:
        """The SDK's last try was refused before the model generated: a 4xx refusal, a
        prompt over the context, a rate limit or an overload (429, 503, 529). Any other
        failure (a 5xx, a connection lost, the SDK's own retries given up) may have been
        billed: the budget settles it at its worst case."""
        status = int(getattr(exc, "status_code", 0) or 0)
        refused = isinstance(failure, (FatalRequestError, ContextOverflowError))
        return refused or status in (429, 503, 529) or 400 <= status < 500

    def _failure(self, exc: BaseException) -> SamplerError:
        message = self.adapter.describe(exc)
        self._counts[f"failed_{type(exc).__name__}"] += 1
        status = int(getattr(exc, "status_code", 0) or 0)
        body = getattr(exc, "body", None)  # the SDKs' API errors keep the reply's parsed JSON
        said = body if isinstance(body, (Mapping, str)) else message
        overflow = context_overflow(status, said, self.adapter.scheme)
        if overflow is not None:  # the server's refusal of a prompt over the context: typed
            self._counts["context_overflow"] += 1
            return overflow
        if self.adapter.is_fatal(exc):
            return FatalRequestError(f"{self.adapter.scheme}: {message}")
        return SamplerError(f"{self.adapter.scheme}: {message}")

    def count_tokens(self, text: str) -> int:
        return self.chat_tokenizer().count(text)

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def stats(self) -> dict[str, Any]:
        """Our counts, and the SDK's: HTTP sends of the sample route beside our attempts, the
        difference being the retries the SDK made on its own."""
        sends = self.adapter.sample_sends() - self._sends_before
        counts = dict(self._counts)
        if self._session is not None and self._slots is not None:  # summed over processes: totals
            counts["sdk_max_in_flight"] = self._session.max_in_flight
            counts["concurrency_slots"] = self._slots.capacity
        if sends:  # 0: the SDK sent through a transport other than httpx, which we cannot see
            counts["sdk_sample_sends"] = sends
            counts["sdk_retries"] = max(0, sends - self._counts["requests"])
        return dict(sorted(counts.items()))

    async def aclose(self) -> None:
        if self._session is not None:
            self._session = None
            await asyncio.to_thread(close_sessions)


class SdkAdapter:
    """What the PyTRIO and Tinker adapters share; each names its SDK, variables and route."""

    scheme = ""
    vendor = ""
    key_env = ""
    url_env = ""
    default_url = ""
    sample_route = ""
    fatal_status = frozenset({400, 401, 403, 404, 422})

    def base_url(self) -> str:
        return os.environ.get(self.url_env) or self.default_url

    def require_key(self) -> str:
        try:
            key = api_key_from_env(self.key_env)
        except ApiKeyError as exc:
            raise StartupError(f"{self.scheme}://: {exc}") from None
        if not key:
            raise StartupError(
                f"{self.scheme}://: {self.key_env} is not set; export your {self.vendor} API key in it"
            )
        return key

    def tokenizer(self, settings: Any, load: Any, model_id: str) -> ChatTokenizer:
        """`--tokenizer PATH`, else the SDK's `get_tokenizer()` (`load`)."""
        if settings.tokenizer:
            from pytest_agenteval.models.tokens.template import tokenizer_from_file

            return tokenizer_from_file(settings.tokenizer)
        try:
            tokenizer = load()
        except Exception as exc:  # noqa: BLE001 - offline, or a model id the hub does not know
            raise StartupError(
                f"{self.scheme}://: cannot load the tokenizer of {model_id!r} ({first_line(exc)}); "
                "pass --tokenizer PATH"
            ) from None
        return hf_chat_tokenizer(tokenizer, f"the SDK's get_tokenizer() ({model_id})")

    def startup_line(self, exc: BaseException, doing: str) -> str:
        """One line for a refusal while signing in or creating the sampler."""
        status = int(getattr(exc, "status_code", 0) or 0)
        code = str(getattr(exc, "code", "") or "")
        message = self.describe(exc)
        url = self.base_url()
        if status in (401, 403) or code.startswith("auth."):
            return (
                f"{self.scheme}://: {self.vendor} at {url} refused the key in {self.key_env} "
                f"({message}); set a valid key"
            )
        if status == 0:
            return (
                f"{self.scheme}://: cannot reach {self.vendor} at {url} while {doing} ({message}); "
                f"check {self.url_env}"
            )
        code = f" {code}" if code else ""
        return f"{self.scheme}://: {self.vendor} refused {doing} (HTTP {status}{code}: {message})"

    def describe(self, exc: BaseException) -> str:
        return first_line(getattr(exc, "message", None) or exc)

    def is_fatal(self, exc: BaseException) -> bool:
        return int(getattr(exc, "status_code", 0) or 0) in self.fatal_status

    def sample_sends(self) -> int:
        return http_sends(self.sample_route)


def sdk_sampling_params(factory: Any, params: SamplingParams) -> Any:
    """Our sampling parameters as the SDK's `SamplingParams` (PyTRIO's and Tinker's take
    the same fields): top-k off is -1, and no stop strings keep the end of sequence."""
    return factory(
        max_tokens=params.max_tokens,
        seed=params.seed,
        temperature=params.temperature,
        top_p=params.top_p,
        top_k=params.top_k if params.top_k > 0 else -1,
        stop=list(params.stop) if params.stop else None,
    )


def sampled_sequences(response: Any, n: int) -> list[tuple[list[int], str]]:
    """(token ids, stop reason) of each of the `n` sequences of an SDK's sample response."""
    if len(response.sequences) != n:
        raise ValueError(f"asked for {n} samples, got {len(response.sequences)}")
    return [([int(t) for t in s.tokens], str(s.stop_reason)) for s in response.sequences]


def first_line(value: Any) -> str:
    lines = str(value).strip().splitlines()
    return lines[0] if lines else type(value).__name__


def doing_what(settings: Any) -> str:
    checkpoint = checkpoint_of(settings.model_path)
    where = f" --model-path {checkpoint}" if checkpoint else ""
    return f"creating a sampler for --base-model {settings.base_model}{where}"


_sends = Counter[str]()
_sends_lock = threading.Lock()


def count_http_sends(*fragments: str) -> None:
    """Count, per process, the HTTP requests whose path contains one of `fragments`, at
    httpx's transport (both SDKs send through httpx): the SDKs retry without telling, and
    this is how their retries reach our summary. The count only grows; a sampler takes the
    difference from its session's start. Whether httpx is counted is asked of httpx itself,
    not remembered here: an httpx imported again (a second `pytest.main` in one process after
    the first one's modules were dropped) is counted too."""
    import httpx

    with _sends_lock:
        _WATCHED.update(fragments)
        original = httpx.AsyncHTTPTransport.handle_async_request
        if getattr(original, "agenteval_counted", False):
            return

        async def counted(self: Any, request: Any) -> Any:
            path = request.url.path
            for fragment in _WATCHED:
                if fragment in path:
                    with _sends_lock:
                        _sends[fragment] += 1
            return await original(self, request)

        counted.agenteval_counted = True  # type: ignore[attr-defined]
        httpx.AsyncHTTPTransport.handle_async_request = counted  # type: ignore[method-assign]


_WATCHED: set[str] = set()


def http_sends(fragment: str) -> int:
    with _sends_lock:
        return _sends[fragment]
