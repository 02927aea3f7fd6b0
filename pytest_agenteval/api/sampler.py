"""The one async interface every model backend implements."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

Message = Mapping[str, Any]  # OpenAI chat message, the wire format every backend speaks


class SamplerError(Exception):
    """A generation could not be produced (infrastructure, not a wrong answer)."""


class FatalRequestError(SamplerError):
    """The server refused the request itself (400/401/403/404): retrying cannot help."""


class ContextOverflowError(SamplerError):
    """The prompt (with the room asked for the reply, where the backend counts it) does not
    fit the model's context window. Every sampler raises this type for it, never a message
    to match: an agentic task ends the conversation there and scores it (BFCL's
    `inference_error`), where any other error is the item's. Not fatal: the next prompt,
    shorter, may fit. `prompt_tokens`/`context`: the backend's numbers, None where not said."""

    def __init__(self, prompt_tokens: int | None, context: int | None, detail: str = "") -> None:
        self.prompt_tokens = prompt_tokens
        self.context = context
        self.detail = detail
        self.attempts = 0  # requests it took to learn it (a server's refusal: 1), for the totals
        size = f" is {prompt_tokens} tokens," if prompt_tokens is not None else ""
        if prompt_tokens is not None and context is not None and prompt_tokens < context:
            size += " with the room asked for the reply"  # the server adds max_tokens
        window = f"the context of {context} tokens" if context is not None else "the model's context"
        message = f"context overflow: the prompt{size} over {window}"
        super().__init__(f"{message} ({detail})" if detail else message)


@dataclass(frozen=True)
class SamplingParams:
    """Sampling parameters of one request, exactly as they are sent."""

    temperature: float
    top_p: float
    top_k: int  # <= 0: not sent / disabled
    max_tokens: int
    seed: int
    stop: tuple[str, ...] = ()
    # A JSON schema (as JSON text) the reply must follow; "" for none. The llama sampler
    # compiles it into a grammar, the OpenAI sampler sends it as a `json_schema`
    # response_format. Text, not a dict: the params stay hashable.
    json_schema: str = ""
    # OpenAI's presence_penalty (-2 to 2); 0: not sent. Backends without one refuse it at
    # start-up (plugin/checks.py).
    presence_penalty: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "stop": list(self.stop),
        }
        if self.json_schema:  # only when set: the cache keys of every other request stay as they were
            fields["json_schema"] = self.json_schema
        if self.presence_penalty:  # likewise: only when set
            fields["presence_penalty"] = self.presence_penalty
        return fields


@dataclass(frozen=True)
class ToolCall:
    """One function call the model asked for (native tool_calls or parsed raw text)."""

    name: str
    arguments: str  # raw JSON (or raw text for the text protocol), parsed by the rollout
    id: str = ""


@dataclass(frozen=True)
class Completion:
    """What a backend returned for one sample."""

    text: str
    finish_reason: str  # "stop" | "length" | "tool_calls"
    prompt_tokens: int = 0
    completion_tokens: int | None = 0  # None: unknown for this sample (one of n, see below)
    tool_calls: tuple[ToolCall, ...] = ()
    latency_s: float = 0.0
    attempts: int = 1  # requests sent, retries included; 0 when served from the cache
    cached: bool = False
    token_ids: tuple[int, ...] = ()  # the sampled ids, where the backend returns them
    # One of several samples of one request (`n`): the request's usage (`prompt_tokens`,
    # `completion_tokens`, one total as servers report it) on its first sample, {} on the
    # others, so that totals count it once; None for a sample that was a request of its own.
    request_usage: Mapping[str, int] | None = None
    model: str = ""  # the reply's own `model` field (OpenAI protocol), "" where none
    system_fingerprint: str = ""  # the reply's `system_fingerprint`, "" where none
    # prompt tokens the provider served from its prompt cache (OpenAI's
    # usage.prompt_tokens_details.cached_tokens), billed at the cached-input price; part of
    # prompt_tokens. One of several samples of one request: in request_usage instead.
    cached_prompt_tokens: int = 0
    # A reasoning model's thoughts (api/reasoning.py): `text` is then the answer only.
    # None: the reply had no reasoning. `reasoning_closed` False: the reasoning never
    # ended (cut off by max_tokens inside it), so `text` holds no answer.
    reasoning: str | None = None
    reasoning_closed: bool = True
    reasoning_tokens: int | None = None  # of completion_tokens; None: not known
    # True: reasoning_tokens is an estimate (an endpoint that reports no count: the
    # reasoning's share of the reply's characters), not a count
    reasoning_tokens_estimated: bool = False


@dataclass(frozen=True)
class ModelIdentity:
    """Who generated: enough to tell two models apart in results and cache keys."""

    backend: str  # "embedded" | "gguf" | "openai" | "replay"
    name: str
    location: str = ""  # file path or endpoint URLs
    fingerprint: str = ""  # e.g. sha256 of the weights file
    details: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "name": self.name,
            "location": self.location,
            "fingerprint": self.fingerprint,
            **dict(self.details),
        }


@runtime_checkable
class Sampler(Protocol):
    identity: ModelIdentity
    native_tools: bool  # True when tools are sent as `tools` and come back as tool_calls

    async def complete(
        self,
        messages: Sequence[Message],
        params: SamplingParams,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | None = None,
    ) -> Completion: ...

    def count_tokens(self, text: str) -> int: ...

    def stats(self) -> dict[str, Any]: ...

    async def aclose(self) -> None: ...


# Priority of the request being made: (item order, sample index). Set by the engine on
# the task that runs a rollout, read by backends that queue for a connection slot.
request_priority: contextvars.ContextVar[tuple[float, int]] = contextvars.ContextVar(
    "request_priority", default=(0.0, 0)
)


# What served the rollout being run: the engine sets a fresh dict on each rollout's task,
# the run's own sampler writes the reply's `model`/`system_fingerprint` into it (a cache
# hit: the stored reply's), and the rollout's generation record carries them.
served_by: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("served_by", default=None)


def note_served(completion: Completion) -> None:
    """Record the reply's `model` and `system_fingerprint` for the rollout being run
    (the last reply's, for a rollout of several turns), and its cached prompt tokens
    (summed over the turns: the generation's cost bills them at the cached-input price)."""
    seen = served_by.get()
    if seen is None:
        return
    if completion.model:
        seen["reply_model"] = completion.model
    if completion.system_fingerprint:
        seen["system_fingerprint"] = completion.system_fingerprint
    if completion.cached_prompt_tokens and completion.request_usage is None:  # summed over the turns
        seen["cached_prompt_tokens"] = seen.get("cached_prompt_tokens", 0) + completion.cached_prompt_tokens


def note_server_wait(seconds: float) -> None:
    """Seconds the rollout being run waited for its model's server to start (a sweep's later
    wave): not the generation's latency, nor its device time (the runtime takes it out)."""
    seen = served_by.get()
    if seen is not None and seconds > 0:
        seen[SERVER_WAIT] = seen.get(SERVER_WAIT, 0.0) + seconds


SERVER_WAIT = "server_wait_s"  # its key in `served_by`, taken out before the record sees it


def approx_token_count(text: str) -> int:
    """Token estimate for backends without a local tokenizer: ~4 characters a token."""
    return (len(text) + 3) // 4


# --batch gathers the requests a run will send before it sends any (models/cost/batch.py): while
# this holds a list, a caching sampler that misses appends (itself, the request's cache key,
# its body) and raises RequestCollected instead of sending; `live_requests()` suspends it
# for requests whose answers decide what comes next (a judge's structured-output probes).
collecting_requests: contextvars.ContextVar[list[tuple[Any, str, dict[str, Any]]] | None] = (
    contextvars.ContextVar("collecting_requests", default=None)
)


class RequestCollected(Exception):  # noqa: N818 - a signal, not a failure
    """Raised by a caching sampler in place of a request --batch will send in a batch."""


@contextlib.contextmanager
def live_requests() -> Iterator[None]:
    """Requests made inside are sent as usual, even while --batch gathers requests."""
    token = collecting_requests.set(None)
    try:
        yield
    finally:
        collecting_requests.reset(token)
