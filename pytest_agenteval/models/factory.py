"""The sampler a run's process uses, built from its `ModelChoice` and settings: one
constructor per backend, with what each needs from the options (the thinking split, the
timeouts and retries, a launched server's sampling defaults, `--concurrency auto`)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from pytest_agenteval.api.sampler import SamplerError
from pytest_agenteval.models.backends.openai import OpenAISampler
from pytest_agenteval.models.backends.replay import ReplaySource
from pytest_agenteval.models.choice import SDK_SCHEMES, ModelChoice
from pytest_agenteval.models.http.aimd import auto_start
from pytest_agenteval.models.http.retry import RetryPolicy
from pytest_agenteval.models.identity import reported_fingerprint
from pytest_agenteval.models.reasoning import ThinkSplit


def make_sampler(choice: ModelChoice, settings: Any, concurrency: int, home: Path | None = None) -> Any:
    """The sampler for this process (`concurrency` is this process's share; `home` the
    cache folder SDK samplers keep their files in)."""
    if choice.kind == "invalid":
        raise SamplerError(choice.model_name or "invalid model options")
    if choice.kind in SDK_SCHEMES:
        from pytest_agenteval.models.backends.sdk import SdkSampler
        from pytest_agenteval.models.backends.sdk_adapters import adapter_for

        return SdkSampler(adapter_for(choice.kind), settings, concurrency, home)
    think = ThinkSplit.from_settings(settings)  # --think-tags, --thinking: what every backend splits by
    if choice.kind in ("embedded", "gguf"):
        assert choice.path is not None
        from pytest_agenteval.models.backends.llama import LlamaSampler, llama_log_path

        return LlamaSampler(
            choice.base or choice.path,
            lora_path=choice.path if choice.base else None,
            embedded=choice.kind == "embedded",
            n_threads=settings.llama_threads,
            n_ctx=settings.n_ctx,
            log_path=llama_log_path(settings.out),  # llama.cpp's stderr, out of test reports
            think=think,
        )
    if choice.kind == "replay":
        assert choice.path is not None
        return ReplaySource(choice.path)
    if choice.kind == "transformers":
        from pytest_agenteval.models.backends.transformers import TransformersSampler

        assert choice.path is not None
        return TransformersSampler(
            choice.path,
            base=choice.base,
            n_threads=settings.llama_threads,
            n_ctx=settings.n_ctx,
            batch_rows=settings.val_n,
            chat_template=settings.chat_template,
            think=think,
        )
    extra = {}
    if settings.thinking != "omit":
        extra["chat_template_kwargs"] = {"enable_thinking": settings.thinking == "on"}
    tokenizer = None
    if settings.tokenizer:
        from pytest_agenteval.models.tokens.template import tokenizer_from_file

        tokenizer = copy.copy(tokenizer_from_file(settings.tokenizer))  # the cached one stays as is
        tokenizer.enable_thinking = think.enable_thinking  # token-in/token-out renders here
        think = think.with_template(tokenizer.template)  # the tags of the model's own template
    launched: dict[str, str] = {}
    awaiting = None
    fingerprint = reported_fingerprint(choice.reported)  # what --endpoint servers report
    if choice.served is not None:  # defaults the server would otherwise apply, sent explicitly
        extra = {**dict(choice.served.sampling_defaults), **extra}
        launched = dict(choice.served.logs)
        fingerprint = choice.served.fingerprint  # the launched weights' files
        if choice.served.pending:  # a sweep's later wave: the same sampler, its address to come
            from pytest_agenteval.models.serve.handoff import LaterServer

            awaiting = LaterServer(Path(choice.served.pending), choice.label)
    sampler = OpenAISampler(
        choice.endpoints,
        choice.model_name or "default",
        concurrency=concurrency,
        api_key_env=settings.api_key_env,
        api_key=choice.api_key,
        launched=launched,
        fingerprint=fingerprint,
        request_timeout_s=settings.request_timeout,
        retry=RetryPolicy(max_attempts=settings.max_attempts, max_total_s=settings.retry_max_seconds),
        extra_body=extra,
        tokenizer=tokenizer,
        continuation=settings.continuation,
        stream=not settings.no_stream and (choice.served is None or choice.served.streams),
        idle_timeout_s=settings.idle_timeout,
        adaptive_start=auto_start(settings.concurrency, concurrency, settings.concurrency_max),
        think=think,
        awaiting=awaiting,
    )
    sampler.records_served = True  # each generation records the reply's model (not a judge's)
    return sampler
