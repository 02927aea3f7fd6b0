"""``ServerConfig``: every knob of the mock OpenAI server, with inert defaults."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pytest_agenteval.testing._batch import BatchConfig
from pytest_agenteval.testing._faults import DEFAULT_FAULT_MIX, FaultPlan, validate_fault_mix
from pytest_agenteval.testing._overflow import CONTEXT_STYLES
from pytest_agenteval.testing._responders import (
    DEFAULT_ANSWER,
    AnswerMapResponder,
    Reply,
    Responder,
    TemplateResponder,
)
from pytest_agenteval.testing._think import REASONING_FIELDS, REASONING_PARSERS

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


@dataclass
class ServerConfig:
    """Defaults: no latency, no faults, no auth, ``n`` honoured, any model name accepted.

    Responder precedence: ``script`` > ``answers`` (falling back to ``answer``) > ``answer``.
    """

    host: str = "127.0.0.1"
    port: int = 0  # 0 = ephemeral
    model: str = "mock-model"
    # more fields of the /v1/models entry, e.g. {"root": "/ckpt/step-100", "max_model_len": 4096}
    # (what vLLM reports about the weights); change it with set_model() while the server runs.
    # None: the server names its own "weights", what it replies, as
    # {"root": "pytest-agenteval-test-server/<digest>"} (_app.replies_identity), so a run's cache knows
    # them (no --model-revision warning); {}: only id and owned_by, a server that says nothing
    model_card: Mapping[str, Any] | None = None
    system_fingerprint: str | None = None  # set: every reply carries it (OpenAI, llama.cpp do)
    strict_model: bool = False  # True: unknown model names get a 404 model_not_found
    api_key: str | None = None  # set: require "Authorization: Bearer <api_key>"
    support_n: bool = True  # False: always one choice, whatever ``n`` says
    support_stream: bool = True  # False: ``stream: true`` gets a 400, as servers without SSE answer
    stream_delay_ms: float = 0.0  # pause between streamed events: a slow, honest generation
    # "vllm": /tokenize (messages or text), "llama": /extras/tokenize, "llama-server":
    # /tokenize of {"content"} (llama.cpp's C++ server); one token a character
    tokenize: str = "none"
    # None: accept any ``response_format``; else a 400 for a type not listed (as servers
    # without structured output answer), e.g. ("json_object",) or () for none at all
    response_formats: tuple[str, ...] | None = None
    # set: a prompt over this many tokens (the 4-characters-a-token estimate) gets the 400
    # that `context_style` sends ("llama-server", "vllm", "sglang", "openai"; _overflow.py)
    context_tokens: int | None = None
    context_style: str = "llama-server"

    latency_ms: float = 0.0  # per request (not per choice)
    jitter_ms: float = 0.0  # uniform +-jitter, deterministic per (key, attempt)

    answer: str = DEFAULT_ANSWER  # may use {seed} {n} {index} {model}
    answers: Mapping[str | re.Pattern[str], str | Reply] | None = None
    script: Responder | None = None

    fault_rate: float = 0.0  # share of attempts that fail (drawn by hash)
    fault_kinds: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_FAULT_MIX))
    fault_seed: int = 0
    fail_first_k_attempts_per_request: int = 0
    fail_first_k_kind: str = "503"
    fault_plan: FaultPlan | None = None  # (FaultContext) -> kind | None; overrides fault_rate
    retry_after: str | None = "0.1"  # Retry-After header of 429s; None = no header
    # set: a rate limit of this many generation requests at once; one more gets a 429 with
    # Retry-After at once, logged as `rate_limited` (_ratelimit.py)
    max_concurrent: int | None = None
    stall_s: float = 30.0  # a stalled request sleeps this long, then...
    stall_then: Literal["close", "respond"] = "close"  # ...drops the connection or answers
    truncate_declares_length: bool = True  # truncated 200 announces the full Content-Length

    # reasoning models (_think.py): the reasoning parser a server runs ("none", "deepseek_r1",
    # "qwen3"), the message field it fills ("reasoning_content", "reasoning"), and whether
    # usage reports completion_tokens_details.reasoning_tokens
    reasoning_parser: str = "none"
    reasoning_field: str = "reasoning_content"
    report_reasoning_tokens: bool = False

    batch: BatchConfig = field(default_factory=BatchConfig)  # the Batch API's behaviour (_batch.py)

    # bill like a provider (_billing.py): usage by the server's own tokenizer, and every
    # token generated counted in `server.billed`, whether or not the client got the reply
    billing: bool = False

    log_bodies: bool = False  # keep each request's whole JSON body in its log entry
    log_path: str | Path | None = None  # also append every log entry to this JSONL file
    shutdown_timeout: float = 1.0  # grace for in-flight requests when the server stops

    def __post_init__(self) -> None:
        if self.host not in LOOPBACK_HOSTS:
            raise ValueError(f"the test server only binds loopback hosts, not {self.host!r}")
        if not 0.0 <= self.fault_rate <= 1.0:
            raise ValueError(f"fault_rate must be within [0, 1], got {self.fault_rate}")
        if self.latency_ms < 0 or self.jitter_ms < 0 or self.stall_s < 0:
            raise ValueError("latency_ms, jitter_ms and stall_s must be >= 0")
        if self.stall_then not in ("close", "respond"):
            raise ValueError(f"stall_then must be 'close' or 'respond': {self.stall_then!r}")
        validate_fault_mix(self.fault_kinds)
        if self.max_concurrent is not None and self.max_concurrent < 1:
            raise ValueError(f"max_concurrent must be >= 1 (or None: no limit), got {self.max_concurrent}")
        if self.context_style not in CONTEXT_STYLES:
            raise ValueError(f"context_style must be one of {CONTEXT_STYLES}: {self.context_style!r}")
        validate_fault_mix({self.fail_first_k_kind: 1.0})
        if self.reasoning_parser not in REASONING_PARSERS:
            raise ValueError(
                f"reasoning_parser must be one of {REASONING_PARSERS}: {self.reasoning_parser!r}"
            )
        if self.reasoning_field not in REASONING_FIELDS:
            raise ValueError(f"reasoning_field must be one of {REASONING_FIELDS}: {self.reasoning_field!r}")

    def responder(self) -> Responder:
        if self.script is not None:
            return self.script
        if self.answers:
            return AnswerMapResponder(self.answers, default=self.answer)
        return TemplateResponder(self.answer)
