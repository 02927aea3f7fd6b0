"""Model backends behind one async interface, chosen from the command line."""

from __future__ import annotations

import copy
import dataclasses
import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agenteval.api.sampler import (
    Completion,
    ContextOverflowError,
    FatalRequestError,
    Message,
    ModelIdentity,
    Sampler,
    SamplerError,
    SamplingParams,
    ToolCall,
    approx_token_count,
    request_priority,
)
from pytest_agenteval.models._aimd import auto_start
from pytest_agenteval.models._identity import (
    identifies_weights,
    identity_warning,
    model_entry,
    reported_fingerprint,
)
from pytest_agenteval.models._openai import OpenAISampler
from pytest_agenteval.models._reasoning import ThinkSplit
from pytest_agenteval.models._replay import PREFIX as REPLAY_PREFIX
from pytest_agenteval.models._replay import ReplayError, ReplaySource
from pytest_agenteval.models._retry import RetryPolicy
from pytest_agenteval.models._schemes import SCHEMES as SDK_SCHEMES
from pytest_agenteval.models._schemes import checkpoint_of, sdk_scheme
from pytest_agenteval.models._slots import EndpointSlots, PrioritySlots
from pytest_agenteval.models.budget import BudgetExceeded

__all__ = [
    "BudgetExceeded",
    "Completion",
    "ContextOverflowError",
    "EndpointSlots",
    "FatalRequestError",
    "LlamaSampler",
    "Message",
    "ModelIdentity",
    "OpenAISampler",
    "PrioritySlots",
    "ReplayError",
    "ReplaySource",
    "RetryPolicy",
    "Sampler",
    "SamplerError",
    "SamplingParams",
    "ToolCall",
    "ModelChoice",
    "approx_token_count",
    "choose_model",
    "identity_warning",
    "make_sampler",
    "model_entry",
    "probe_endpoint",
    "probe_models",
    "probe_token_routes",
    "request_priority",
]


def __getattr__(name: str) -> Any:
    """The llama.cpp backend loads when asked for: an endpoint run never needs it."""
    if name in ("LlamaSampler", "embedded_model_path"):
        from pytest_agenteval.models import _llama

        return getattr(_llama, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class ModelChoice:
    """Which backend the options select, checked at start-up."""

    # "embedded" | "gguf" | "openai" | "replay" | "transformers" | "trio" | "tinker" | "invalid"
    # (for "invalid", model_name says why)
    kind: str
    path: Path | None = None
    endpoints: tuple[str, ...] = ()
    model_name: str | None = None  # trio/tinker: the base model
    # transformers: the base checkpoint of an adapter `path`; gguf: the base gguf of a LoRA `path`
    base: Path | None = None
    served: Mapping[str, Any] | None = None  # openai: the servers this run launched (serving/)
    api_key: str | None = field(default=None, repr=False)  # a launched server's per-launch key
    uri: str = ""  # trio/tinker: the --model-path as given
    # openai (--endpoint): each endpoint's /v1/models entry of the served name (None: not
    # listed), asked once on the controller; the cache key's fingerprint (models/_identity.py)
    reported: tuple[Mapping[str, Any] | None, ...] = ()

    @property
    def label(self) -> str:
        if self.served is not None:
            return str(self.served.get("label") or self.model_name)
        if self.kind == "transformers" and self.model_name:  # a hub id: its name, not the commit
            return self.model_name.rstrip("/").rsplit("/", 1)[-1]
        if self.kind in SDK_SCHEMES:
            checkpoint = checkpoint_of(self.uri)
            return checkpoint.rstrip("/").rsplit("/", 1)[-1] if checkpoint else str(self.model_name)
        if self.kind == "openai":
            return self.model_name or "endpoint"
        if self.kind == "invalid":
            return "invalid-model"
        if self.kind == "embedded":
            return "smollm2-135m"
        assert self.path is not None
        return f"replay-{self.path.stem}" if self.kind == "replay" else self.path.stem


def choose_model(
    model_path: str | None,
    endpoints: tuple[str, ...],
    model_name: str | None,
    *,
    base_model: str | None = None,
    chat_template: str | None = None,
) -> ModelChoice:
    """Map the options to a backend; raise ValueError with one line naming the fix.
    A launched server (`--serve`) replaces the choice later, on the controller (serving/)."""
    # -- trio:// and tinker:// (the SDK samplers, _sdk.py) --
    scheme = sdk_scheme(model_path)
    if scheme is not None:
        if not base_model:
            raise ValueError(
                f"--model-path {model_path} needs --base-model (the model the checkpoint was trained "
                f"from; `--model-path {scheme}://` alone samples the base model)"
            )
        return ModelChoice(scheme, model_name=base_model, uri=str(model_path))
    # -- end of trio:// and tinker:// --
    if endpoints:
        return ModelChoice("openai", endpoints=endpoints, model_name=model_name)
    if model_path is None:
        try:
            from pytest_agenteval.models._llama import embedded_model_path

            return ModelChoice("embedded", path=embedded_model_path())
        except SamplerError as exc:
            raise ValueError(str(exc)) from None
    if model_path.startswith(REPLAY_PREFIX):
        return ModelChoice("replay", path=Path(model_path[len(REPLAY_PREFIX) :]).expanduser())
    path = Path(model_path).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise ValueError(f"--model-path {model_path}: no such file; give an existing .gguf file")
        from pytest_agenteval.models.serve.resolve import is_gguf_adapter, resolve_model_path

        if is_gguf_adapter(path):  # a LoRA: llama.cpp runs it on its base (lora_path)
            adapter = resolve_model_path(model_path, base_model=base_model, identity=False)
            assert adapter.base is not None
            return ModelChoice("gguf", path=path, base=adapter.base.path)
        return ModelChoice("gguf", path=path)
    from pytest_agenteval.models.serve.resolve import resolve_model_path

    resolved = resolve_model_path(
        model_path, base_model=base_model, chat_template=chat_template, identity=False
    )
    if resolved.kind == "scheme":
        scheme = model_path.split("://")[0]
        raise ValueError(f"--model-path {model_path}: no backend here takes {scheme}:// paths")
    # a checkpoint or adapter without a launched server: the in-process transformers backend
    from pytest_agenteval.models._checkpoint import choose_checkpoint

    assert resolved.path is not None
    base = base_model  # a checkpoint with --base-model: choose_checkpoint says it is for adapters
    if resolved.base is not None:
        assert resolved.base.path is not None
        base = str(resolved.base.path)
    choice = choose_checkpoint(resolved.path, base)
    if resolved.kind == "checkpoint" and not Path(model_path).expanduser().exists():
        choice = dataclasses.replace(choice, model_name=model_path)  # a hub id, as given
    return choice


def probe_endpoint(url: str, api_key: str | None, timeout_s: float = 10.0) -> list[str]:
    """Model ids the server lists at /models; [] when it has no such route.
    Raises ValueError with one line when the server is unreachable or refuses the key."""
    return [str(m.get("id")) for m in probe_models(url, api_key, timeout_s)]


def probe_models(url: str, api_key: str | None, timeout_s: float = 10.0) -> list[dict[str, Any]]:
    """The entries the server lists at /models (id, root, max_model_len, ...); [] when it
    has no such route. Raises ValueError as `probe_endpoint` does."""
    request = urllib.request.Request(f"{url.rstrip('/')}/models")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            payload: Any = json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise ValueError(
                f"--endpoint {url} refused the API key (HTTP {exc.code}); set the key in the "
                "environment variable named by --api-key-env"
            ) from None
        return []
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ValueError(
            f"cannot reach --endpoint {url} ({reason}); start the server or fix the URL"
        ) from None
    except json.JSONDecodeError:
        return []
    data = payload.get("data", []) if isinstance(payload, dict) else []
    return [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []


def probe_token_routes(url: str, model: str, api_key: str | None, timeout_s: float = 10.0) -> None:
    """`--continuation tokens` needs vLLM's `/tokenize` with messages; raise ValueError with
    one line where the server has none."""
    root = url[: -len("/v1")] if url.rstrip("/").endswith("/v1") else url.rstrip("/")
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": True}
    request = urllib.request.Request(
        f"{root}/tokenize", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            tokens = json.loads(response.read() or b"{}").get("tokens")
    except (urllib.error.URLError, OSError, ValueError, AttributeError):
        tokens = None
    if not tokens:
        raise ValueError(
            f"--continuation tokens: {root} has no /tokenize that renders messages (vLLM and SGLang "
            "have one); use --continuation messages"
        )


def make_sampler(choice: ModelChoice, settings: Any, concurrency: int, home: Path | None = None) -> Any:
    """The sampler for this process (`concurrency` is this process's share; `home` the
    cache folder SDK samplers keep their files in)."""
    if choice.kind == "invalid":
        raise SamplerError(choice.model_name or "invalid model options")
    if choice.served is not None and choice.served.get("pending"):  # a sweep's server that starts later
        return _waiting_sampler(choice, settings, concurrency, home)
    if choice.kind in SDK_SCHEMES:
        from pytest_agenteval.models._sdk import SdkSampler
        from pytest_agenteval.models._sdk_backends import adapter_for

        return SdkSampler(adapter_for(choice.kind), settings, concurrency, home)
    think = ThinkSplit.from_settings(settings)  # --think-tags, --thinking: what every backend splits by
    if choice.kind in ("embedded", "gguf"):
        assert choice.path is not None
        from pytest_agenteval.models._llama import LlamaSampler, llama_log_path

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
        from pytest_agenteval.models._transformers import TransformersSampler

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
        from pytest_agenteval.models._template import tokenizer_from_file

        tokenizer = copy.copy(tokenizer_from_file(settings.tokenizer))  # the cached one stays as is
        tokenizer.enable_thinking = think.enable_thinking  # token-in/token-out renders here
        think = think.with_template(tokenizer.template)  # the tags of the model's own template
    launched: dict[str, str] = {}
    fingerprint = reported_fingerprint(choice.reported)  # what --endpoint servers report
    if choice.served is not None:  # defaults the server would otherwise apply, sent explicitly
        extra = {**dict(choice.served.get("sampling_defaults") or {}), **extra}
        launched = dict(choice.served.get("logs") or {})
        fingerprint = str(choice.served.get("fingerprint", ""))  # the launched weights' files
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
        stream=not settings.no_stream and bool((choice.served or {}).get("streams", True)),
        idle_timeout_s=settings.idle_timeout,
        adaptive_start=auto_start(settings.concurrency, concurrency, settings.concurrency_max),
        think=think,
    )
    sampler.records_served = True  # each generation records the reply's model (not a judge's)
    return sampler


def _waiting_sampler(choice: ModelChoice, settings: Any, concurrency: int, home: Path | None) -> Any:
    """The sampler of a sweep's model whose server is not up yet: it waits for the file the
    controller writes once the server is ready (models/serve/handoff.py), then sends there."""
    from pytest_agenteval.models.serve.handoff import WaitingSampler

    assert choice.served is not None

    def build(data: Mapping[str, Any]) -> Any:
        served = ModelChoice(
            "openai",
            endpoints=tuple(data["endpoints"]),
            model_name=str(data["model_name"]),
            served=dict(data["served"]),
            api_key=data.get("key"),
        )
        return make_sampler(served, settings, concurrency, home)

    identity = ModelIdentity(  # what the OpenAI sampler of a launched server says (the cache key)
        backend="openai",
        name=choice.model_name or "default",
        location="launched",
        fingerprint=str(choice.served.get("fingerprint", "")),
        details={"api_key_env": settings.api_key_env},
    )
    return WaitingSampler(
        Path(choice.served["pending"]), identity, build, settings.serve_timeout, label=choice.label
    )


def describe_model(choice: ModelChoice, settings: Any) -> dict[str, Any]:
    """Model identity for the summary, without loading the model."""
    from pytest_agenteval.models._llama import EMBEDDED_NAME, file_fingerprint

    info: dict[str, Any] = {"backend": choice.kind, "label": choice.label}
    if getattr(settings, "model_revision", None):
        info["revision"] = settings.model_revision  # --model-revision: part of the cache key
    if choice.kind == "invalid":
        info["error"] = choice.model_name
    elif choice.kind in ("embedded", "gguf"):
        assert choice.path is not None
        info.update(
            name=EMBEDDED_NAME if choice.kind == "embedded" else choice.path.stem,
            path=str(choice.path),
            sha256=file_fingerprint(choice.path),
            n_threads=settings.llama_threads,
            n_ctx=settings.n_ctx,
            token_counter="the model's own tokenizer and chat template (token-in/token-out)",
        )
        if choice.base is not None:  # a GGUF LoRA: sha256 is the adapter's, the base beside it
            info.update(base=str(choice.base), base_sha256=file_fingerprint(choice.base))
    elif choice.kind == "openai" and choice.served is not None:
        info.update(name=choice.model_name, served=dict(choice.served), token_counter="the server's")
    elif choice.kind == "transformers":
        from pytest_agenteval.models._checkpoint import describe_checkpoint

        info.update(describe_checkpoint(choice.path, choice.base, settings))
    elif choice.kind in SDK_SCHEMES:
        from pytest_agenteval.models._sdk_backends import adapter_for

        adapter = adapter_for(choice.kind)
        info.update(
            name=checkpoint_of(choice.uri) or choice.model_name,
            base_model=choice.model_name,
            model_path=checkpoint_of(choice.uri),
            location=adapter.base_url(),
            api_key_env=adapter.key_env,
            token_counter=f"--tokenizer {settings.tokenizer}" if settings.tokenizer else "the SDK's",
        )
    elif choice.kind == "openai":
        info.update(
            name=choice.model_name,
            endpoints=list(choice.endpoints),
            reported=list(choice.reported),  # each endpoint's /v1/models entry (the cache key's)
            weights_identified=identifies_weights(choice.reported),
            api_key_env=settings.api_key_env,
            token_counter=(
                f"--tokenizer {settings.tokenizer}"
                if settings.tokenizer
                else "the server's tokenizer where it has /tokenize or /extras/tokenize, else an "
                "estimate (each generation records which: token_counting)"
            ),
        )
    else:
        assert choice.path is not None
        info.update(name=choice.label, path=str(choice.path), sha256=file_fingerprint(choice.path))
    return {**info, "display": display_name(choice, info)}


def display_name(choice: ModelChoice, info: Mapping[str, Any]) -> str:
    """The model as people read it (terminal, summaries): a launched server's is the model
    the user gave with its server (`step-200 (vllm, launched)`), not the alias it serves."""
    if choice.served is not None and choice.served.get("display"):
        return str(choice.served["display"])
    return f"{info.get('name') or choice.label} ({choice.kind})"
