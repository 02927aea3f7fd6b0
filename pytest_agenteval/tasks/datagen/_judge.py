"""One judge: its samplers (the plugin's own, so cache, retries and concurrency apply),
the structured-output mode negotiated per endpoint, the nonce, and bounded re-asks.

Modes, tried in order on an endpoint: `json_schema` (OpenAI strict structured output),
`json_object` with a `schema` (llama-cpp-python's server), then `prompt` (the reply
template plus the strict parser). A 400 to a mode is a capability answer, not a failure:
the next mode is tried and the one that worked is kept for the rest of the process.
In-process GGUF models (the embedded one too) are judged in `grammar` mode: the verdict
schema, nonce pinned, compiled into a llama.cpp grammar (`SamplingParams.json_schema`),
with max_tokens capped at the longest reply that schema allows."""

from __future__ import annotations

import asyncio
import contextvars
import copy
import dataclasses
import hashlib
import hmac
import json
import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agenteval.api import progress
from pytest_agenteval.api.sampler import live_requests
from pytest_agenteval.models import (
    BudgetExceeded,
    EndpointSlots,
    FatalRequestError,
    OpenAISampler,
    RetryPolicy,
    SamplerError,
    SamplingParams,
)
from pytest_agenteval.solvers.answer import answer_only
from pytest_agenteval.tasks.datagen._prompts import (
    grammar_max_tokens,
    grammar_schema,
    reask_messages,
    response_format,
)
from pytest_agenteval.tasks.datagen._verdict import parse_reply

MODES = ("json_schema", "json_object", "prompt")
REPLY_KEPT_CHARS = 2000
SECRET_FILE = "datagen-nonce.key"


@dataclass(frozen=True)
class JudgeSpec:
    """Who judges: an endpoint and model name, or (endpoint None) the run's own model."""

    name: str
    endpoints: tuple[str, ...] = ()
    model: str | None = None


def judge_specs(endpoints: tuple[str, ...], models: tuple[str, ...]) -> list[JudgeSpec]:
    """Pair `--judge-endpoint` with `--judge-model` by position (one model name may serve
    every endpoint). Raises ValueError with the fix."""
    if not endpoints:
        if models:
            raise ValueError("--judge-model needs --judge-endpoint URL (one per judge)")
        return [JudgeSpec("run-model")]
    if len(models) not in (1, len(endpoints)):
        raise ValueError(
            f"{len(endpoints)} --judge-endpoint but {len(models)} --judge-model: give one "
            "--judge-model per --judge-endpoint (or one for all)"
        )
    names = models * len(endpoints) if len(models) == 1 else models
    specs, seen = [], {}
    for endpoint, model in zip(endpoints, names, strict=True):
        seen[model] = seen.get(model, 0) + 1
        label = model if names.count(model) == 1 else f"{model}#{seen[model]}"
        specs.append(JudgeSpec(label, (endpoint,), model))
    return specs


def nonce_secret(cache_dir: Path | None) -> bytes:
    """Kept beside the generation cache, so reruns derive the same nonces (and hit the
    cache) while the data generator can never know them. Created once, atomically."""
    if cache_dir is None:
        return secrets.token_bytes(32)
    path = Path(cache_dir) / SECRET_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        for _ in range(50):  # another worker is writing it right now
            data = path.read_bytes()
            if len(data) == 32:
                return data
            import time

            time.sleep(0.01)
        raise
    with os.fdopen(fd, "wb") as handle:
        handle.write(secrets.token_bytes(32))
    return path.read_bytes()


def derive_nonce(secret: bytes, *parts: str) -> str:
    message = "\x1f".join(parts).encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()[:16]


_REFUSAL = re.compile(r"HTTP (400|422)\b|last error: (500|501)\b")


def refusal_of(exc: Exception) -> str | None:
    """The status of a structured-output probe's refusal: 400, 422, or 500/501
    (llama-cpp-python's server answers json_schema with a 500). None for what says
    nothing about capabilities: 429, 502-504, connection errors, timeouts."""
    match = _REFUSAL.search(str(exc))
    return None if match is None else (match.group(1) or match.group(2))


class JudgeClient:
    def __init__(
        self,
        spec: JudgeSpec,
        make_sampler: Callable[[str, str, bool], Any],
        fixed_mode: str | None,
        owns: bool,
    ) -> None:
        self.spec = spec
        self.owns = owns  # the samplers are this judge's own (closed with it)
        self._make_sampler = make_sampler  # (mode, kind, probe) -> sampler
        self._samplers: dict[tuple[str, str, bool], Any] = {}
        self.mode: dict[str, str] = (
            {} if fixed_mode is None else {"pointwise": fixed_mode, "pairwise": fixed_mode}
        )
        self._locks: dict[str, asyncio.Lock] = {}
        self.refused: dict[str, list[str]] = {}  # kind -> "mode: status" the endpoint refused

    async def aclose(self) -> None:
        if self.owns:
            for sampler in self._samplers.values():
                await sampler.aclose()
        self._samplers.clear()

    def sampler(self, mode: str, kind: str, probe: bool = False) -> Any:
        """`probe`: one attempt, no retries (a refusal is an answer, not a fault)."""
        if (mode, kind, probe) not in self._samplers:
            self._samplers[(mode, kind, probe)] = self._make_sampler(mode, kind, probe)
        return self._samplers[(mode, kind, probe)]

    async def _negotiated(self, kind: str, messages: list[dict[str, str]], params: SamplingParams) -> Any:
        if kind not in self.mode:
            async with self._locks.setdefault(kind, asyncio.Lock()):  # one probe at a time
                if kind not in self.mode:
                    return await self._negotiate(kind, messages, params)
        mode = self.mode[kind]  # known: calls run concurrently, outside the lock
        return mode, await self.sampler(mode, kind).complete(messages, params)

    async def _negotiate(self, kind: str, messages: list[dict[str, str]], params: SamplingParams) -> Any:
        with live_requests():  # the probes decide the mode: sent at once, even under --batch
            return await self._probe_modes(kind, messages, params)

    async def _probe_modes(self, kind: str, messages: list[dict[str, str]], params: SamplingParams) -> Any:
        for mode in MODES:
            probe = mode != "prompt"
            try:
                completion = await self.sampler(mode, kind, probe).complete(messages, params)
            except BudgetExceeded:
                raise  # not sent: says nothing about the mode
            except SamplerError as exc:  # FatalRequestError included
                status = refusal_of(exc) if probe else None
                if status is not None:
                    self.refused.setdefault(kind, []).append(f"{mode}: {status}")
                    continue
                if not probe:
                    raise
                # a transient fault: this mode again, with the sampler's full retries
                completion = await self.sampler(mode, kind).complete(messages, params)
                completion = dataclasses.replace(completion, attempts=completion.attempts + 1)  # + the probe
            self.mode[kind] = mode
            return mode, completion
        raise AssertionError("unreachable: prompt mode either answers or raises")

    async def judge(
        self, kind: str, messages: list[dict[str, str]], nonce: str, params: SamplingParams, reasks: int
    ) -> dict[str, Any]:
        """One verdict: valid, invalid (after `reasks` re-asks at temperature 0, each
        showing the parse error) or error (transport). Never imputed."""
        result: dict[str, Any] = {
            "judge": self.spec.name,
            **({"model": self.spec.model} if self.spec.model else {}),  # priced by it (docs/cost.md)
            "kind": kind,
            "asks": 0,
            "attempts": 0,
            "retries": 0,
        }
        tokens = [0, 0]
        conversation = messages
        _CALL_NONCE.set(nonce)  # this task's own context: read by _JudgeSampler.body
        if self.mode.get(kind) == "grammar":  # an in-process model, held to the schema
            params = dataclasses.replace(
                params,
                json_schema=json.dumps(grammar_schema(kind, nonce)),
                max_tokens=min(params.max_tokens, grammar_max_tokens(kind)),
            )
        for ask in range(reasks + 1):
            try:
                mode, completion = await self._negotiated(kind, conversation, params)
            except (FatalRequestError, BudgetExceeded):
                # refused (401/404, or 400 in prompt mode): going on cannot help; or not sent
                # for the budget: the item is an error, its verdicts requested again on a rerun
                raise
            except SamplerError as exc:
                result.update(status="error", error=f"judge call failed: {exc}")
                break
            progress.note_judge_call(completion)
            result["asks"] = ask + 1
            result["attempts"] += completion.attempts
            result["retries"] += max(0, completion.attempts - 1)  # the sampler's own retries
            result["cached"] = completion.cached
            tokens[0] += completion.prompt_tokens
            tokens[1] += completion.completion_tokens
            completion = answer_only(completion)  # the verdict is read from the answer, never the thoughts
            parsed = parse_reply(completion.text, nonce, kind)
            if not completion.reasoning_closed:
                parsed_error = "thinking_truncated: the reasoning never closed within max_tokens, no verdict"
            elif completion.finish_reason == "length" and parsed.ok is False:
                parsed_error = f"reply cut at max_tokens ({parsed.error})"
            else:
                parsed_error = parsed.error
            result.update(
                parse_mode=mode,
                refused_modes=list(self.refused.get(kind, ())),
                reply=completion.text[:REPLY_KEPT_CHARS],
                repairs=list(parsed.repairs),
            )
            if parsed.ok:
                result.update(status="valid", error="", **parsed.value)
                break
            result.update(status="invalid", error=parsed_error)
            conversation = reask_messages(messages, completion.text[:REPLY_KEPT_CHARS], parsed_error, nonce)
            params = SamplingParams(**{**params.as_dict(), "temperature": 0.0, "stop": params.stop})
        result.update(prompt_tokens=tokens[0], completion_tokens=tokens[1])
        return result


_CALL_NONCE: contextvars.ContextVar[str | None] = contextvars.ContextVar("judge_nonce", default=None)


def pin_nonce(fmt: dict[str, Any], nonce: str) -> dict[str, Any]:
    """The response_format with the schema's nonce pinned to this call's value, so a
    grammar-constrained server cannot write another one."""
    pinned = copy.deepcopy(fmt)
    schema = pinned["json_schema"]["schema"] if pinned.get("type") == "json_schema" else pinned.get("schema")
    if schema is not None:
        schema["properties"]["nonce"] = {"type": "string", "enum": [nonce]}
    return pinned


class _JudgeSampler(OpenAISampler):
    """The plugin's OpenAISampler (slots, retries) whose response_format carries the nonce
    of the call in flight (a context variable set by `JudgeClient.judge`). The nonce is in
    the messages too, so the generation cache's key already tells calls apart. A judge's
    samplers (one per mode and kind) share one set of slots: `--concurrency` is per
    endpoint, not per sampler."""

    def __init__(self, *args: Any, slots: EndpointSlots, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._shared_slots = slots

    def _ensure_session(self) -> Any:
        session = super()._ensure_session()
        self._slots = self._shared_slots
        return session

    def body(
        self, messages: Any, params: SamplingParams, tools: Any = None, tool_choice: str | None = None
    ) -> dict[str, Any]:
        body = super().body(messages, params, tools, tool_choice)
        nonce = _CALL_NONCE.get()
        if nonce and "response_format" in body:
            body["response_format"] = pin_nonce(body["response_format"], nonce)
        return body


def openai_judge(
    spec: JudgeSpec, settings: Any, concurrency: int, cache: Any, run_sampler: Any = None, budget: Any = None
) -> JudgeClient:
    """A judge on an OpenAI-compatible endpoint: one sampler per (mode, kind), each the
    plugin's OpenAISampler (retries, slots) behind the generation cache. `run_sampler`:
    the run's own sampler when the judge is the run's own endpoint, whose slots it shares
    (`--concurrency` per endpoint over both) and whose weights' identity and
    `--model-revision` go into its cache key (step-200 is not judged by step-100's cache).
    `budget` (models.cost.budget.RunBudget): the run's, which the judge's requests count in too."""
    from pytest_agenteval.models import OpenAISampler
    from pytest_agenteval.models.cache import CachingSampler

    assert spec.endpoints
    own = run_sampler
    while hasattr(own, "inner"):  # under the cache (and the budget): the sampler itself
        own = own.inner
    if isinstance(own, OpenAISampler):
        slots, fingerprint = own.shared_slots(), own.identity.fingerprint
        revision = settings.model_revision or ""
    else:
        slots, fingerprint, revision = EndpointSlots(spec.endpoints, concurrency), "", ""

    def make(mode: str, kind: str, probe: bool) -> Any:
        fmt = response_format(mode, kind)
        extra: dict[str, Any] = {} if fmt is None else {"response_format": fmt}
        if settings.thinking != "omit":
            extra["chat_template_kwargs"] = {"enable_thinking": settings.thinking == "on"}
        attempts = 1 if probe else settings.max_attempts
        sampler = _JudgeSampler(
            spec.endpoints,
            spec.model or "default",
            concurrency=concurrency,
            api_key_env=settings.api_key_env,
            request_timeout_s=settings.request_timeout,
            retry=RetryPolicy(max_attempts=attempts, max_total_s=settings.retry_max_seconds),
            extra_body=extra,
            slots=slots,
            fingerprint=fingerprint,
        )
        if budget is not None:  # under the cache, as the run's own sampler
            sampler = budget.wrap(sampler, spec.model or "default")
        return sampler if cache is None else CachingSampler(sampler, cache, revision)

    return JudgeClient(spec, make, None, owns=True)


def local_judge(spec: JudgeSpec, sampler: Any, grammar: bool = False) -> JudgeClient:
    """The run's own in-process model as the judge: `grammar` mode where its sampler
    compiles `SamplingParams.json_schema` (llama.cpp: embedded or GGUF), else prompt mode."""
    mode = "grammar" if grammar else "prompt"
    return JudgeClient(spec, lambda mode, kind, probe: sampler, mode, owns=False)
