"""What the model options name, decided at start-up: `ModelChoice` (which backend, which
weights or endpoints), `choose_model` from `--model-path`/`--endpoint`/`--model-name`, the
`/v1/models` and `/tokenize` probes of an endpoint, and the model's identity for the summary
(`describe_model`) without loading it. A launched server (`--serve`, models/serve/) replaces
the choice later, on the controller."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agenteval.api.sampler import SamplerError
from pytest_agenteval.models.backends.replay import PREFIX as REPLAY_PREFIX
from pytest_agenteval.models.http.probe import Unreachable, request_json
from pytest_agenteval.models.identity import identifies_weights
from pytest_agenteval.models.schemes import SCHEMES as SDK_SCHEMES
from pytest_agenteval.models.schemes import checkpoint_of, sdk_scheme
from pytest_agenteval.models.serve.record import ServedModel


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
    served: ServedModel | None = None  # openai: the server this run launched (models/serve/)
    api_key: str | None = field(default=None, repr=False)  # a launched server's per-launch key
    uri: str = ""  # trio/tinker: the --model-path as given
    # openai (--endpoint): each endpoint's /v1/models entry of the served name (None: not
    # listed), asked once on the controller; the cache key's fingerprint (models/identity.py)
    reported: tuple[Mapping[str, Any] | None, ...] = ()

    def __post_init__(self) -> None:
        if self.served is not None and not isinstance(self.served, ServedModel):  # its dict form
            object.__setattr__(self, "served", ServedModel.from_dict(self.served))

    @property
    def label(self) -> str:
        if self.served is not None:
            return self.served.label or str(self.model_name)
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


WORKERINPUT_KEY = "agenteval_serve"  # a launched server's choice, as xdist workers receive it


def served_choice(data: Mapping[str, Any]) -> ModelChoice:
    """The choice of a run whose server was launched, the same on the controller and on
    every worker: an OpenAI-protocol choice pointing at the server's replicas."""
    return ModelChoice(
        "openai",
        endpoints=tuple(data.get("endpoints") or ()),  # none yet: a later wave's (`pending`)
        model_name=str(data["model_name"]),
        served=ServedModel.from_dict(data["served"]),
        api_key=data.get("key"),
    )


def served_data(choice: ModelChoice) -> dict[str, Any]:
    """A launched server's choice as workers receive it (`served_choice` reads it back);
    the per-launch key travels over xdist's channel, in memory only, never to a file."""
    assert choice.served is not None
    return {
        "endpoints": list(choice.endpoints),
        "model_name": choice.model_name,
        "served": choice.served.as_dict(),
        "key": choice.api_key,
    }


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
    # -- trio:// and tinker:// (the SDK samplers, backends/sdk.py) --
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
            from pytest_agenteval.models.backends.llama import embedded_model_path

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
    from pytest_agenteval.models.backends.checkpoint import checkpoint_base

    assert resolved.path is not None
    base = base_model  # a checkpoint with --base-model: checkpoint_base says it is for adapters
    if resolved.base is not None:
        assert resolved.base.path is not None
        base = str(resolved.base.path)
    choice = ModelChoice("transformers", path=resolved.path, base=checkpoint_base(resolved.path, base))
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
    try:
        status, payload = request_json(f"{url.rstrip('/')}/models", api_key=api_key, timeout_s=timeout_s)
    except Unreachable as exc:
        raise ValueError(f"cannot reach --endpoint {url} ({exc}); start the server or fix the URL") from None
    if status in (401, 403):
        raise ValueError(
            f"--endpoint {url} refused the API key (HTTP {status}); set the key in the "
            "environment variable named by --api-key-env"
        )
    if status >= 400:
        return []
    data = payload.get("data", []) if isinstance(payload, dict) else []
    return [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []


def probe_token_routes(url: str, model: str, api_key: str | None, timeout_s: float = 10.0) -> None:
    """`--continuation tokens` needs vLLM's `/tokenize` with messages; raise ValueError with
    one line where the server has none."""
    root = url[: -len("/v1")] if url.rstrip("/").endswith("/v1") else url.rstrip("/")
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": True}
    try:
        status, payload = request_json(f"{root}/tokenize", api_key=api_key, body=body, timeout_s=timeout_s)
    except Unreachable:
        status, payload = 0, None
    tokens = payload.get("tokens") if status == 200 and isinstance(payload, dict) else None
    if not tokens:
        raise ValueError(
            f"--continuation tokens: {root} has no /tokenize that renders messages (vLLM and SGLang "
            "have one); use --continuation messages"
        )


def describe_model(choice: ModelChoice, settings: Any) -> dict[str, Any]:
    """Model identity for the summary, without loading the model."""
    from pytest_agenteval.models.backends.llama import EMBEDDED_NAME, file_fingerprint

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
        info.update(name=choice.model_name, served=choice.served.describe(), token_counter="the server's")
    elif choice.kind == "transformers":
        from pytest_agenteval.models.backends.checkpoint import describe_checkpoint

        info.update(describe_checkpoint(choice.path, choice.base, settings))
    elif choice.kind in SDK_SCHEMES:
        from pytest_agenteval.models.backends.sdk_adapters import adapter_for

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
    if choice.served is not None and choice.served.label:
        return choice.served.display
    return f"{info.get('name') or choice.label} ({choice.kind})"
