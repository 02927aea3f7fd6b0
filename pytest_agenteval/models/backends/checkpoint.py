"""A transformers checkpoint folder, or a peft LoRA adapter on its base: loading (one model
per process), its identity, its chat tokenizer and end-of-sequence ids, the adapter probe, and
the start-up checks of `--model-path` for the in-process backend (`transformers.py`)."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_agenteval.api.sampler import ModelIdentity, SamplerError
from pytest_agenteval.models.backends.llama import file_fingerprint
from pytest_agenteval.models.serve.probe import adapter_is_live
from pytest_agenteval.models.tokens.template import ChatTokenizer, tokenizer_from_file

INSTALL_HINT = (
    "install torch first (pip install torch==2.13.0; a CPU build here, plain `pip install torch` "
    "elsewhere pulls CUDA), then: pip install 'pytest-agenteval[transformers]'"
)
PROBE_MESSAGES = [{"role": "user", "content": "What is 12 + 30? Answer with the number."}]
_IDENTITY_FILES = (".json", ".safetensors", ".bin", ".jinja", ".model", ".txt")


def check_installed() -> None:
    """Raise ValueError with one line naming the install command when torch, transformers
    or peft is missing (checked at start-up, before anything runs)."""
    for module in ("torch", "transformers", "peft"):
        try:
            __import__(module)
        except ImportError as exc:
            raise ValueError(
                f"the transformers backend cannot import {module} ({exc}); {INSTALL_HINT}"
            ) from None


def folder_fingerprint(folder: Path) -> str:
    """sha256 over the config, tokenizer and weight files of a checkpoint or adapter
    folder (each file hashed once per process, by path, size and mtime)."""
    digest = hashlib.sha256()
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.name.endswith(_IDENTITY_FILES):
            digest.update(f"{path.name}:{file_fingerprint(path)}\n".encode())
    return digest.hexdigest()


def adapter_base(adapter: Path) -> str | None:
    """The base model an adapter folder names (`base_model_name_or_path`), if any."""
    try:
        config = json.loads((adapter / "adapter_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return config.get("base_model_name_or_path") or None


def checkpoint_from_gguf(gguf: Path, folder: Path) -> Path:
    """Save a GGUF model (e.g. the embedded SmolLM2) as a transformers checkpoint folder:
    dequantized to fp32, with its tokenizer and chat template. For tests, benchmarks and
    for comparing this backend with llama.cpp on the same weights."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    # the weights are plain fp32 tensors now; the gguf marker would refuse save_pretrained
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


# -- one loaded model per process ------------------------------------------------------
_MODELS: dict[tuple[str, str | None, int], Any] = {}
_MODELS_LOCK = threading.Lock()


def load_model(path: Path, base: Path | None, n_threads: int) -> Any:
    """The model (base plus adapter when `base` is given) in fp32 on the CPU, eval mode,
    loaded once per process: the start-up probe and the sampler share it."""
    key = (str(path), str(base) if base else None, n_threads)
    with _MODELS_LOCK:
        if key not in _MODELS:
            import torch
            from transformers import AutoModelForCausalLM
            from transformers.utils import logging as hf_logging

            torch.set_num_threads(n_threads)
            hf_logging.disable_progress_bar()  # no "Loading weights" bars in pytest's output
            model = AutoModelForCausalLM.from_pretrained(str(base or path), dtype=torch.float32)
            # generate() fills every field a call leaves unset from the model's own
            # generation config (generation_config.json): make that one neutral too
            model.generation_config = _neutral_generation_config(model.generation_config)
            if base is not None:
                from peft import PeftModel

                model = PeftModel.from_pretrained(model, str(path))
            model.eval()
            _MODELS[key] = model
        return _MODELS[key]


def _neutral_generation_config(loaded: Any) -> Any:
    """Only the special-token ids of the checkpoint's generation config survive."""
    from transformers import GenerationConfig

    ids = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")
    return GenerationConfig(**{name: getattr(loaded, name, None) for name in ids})


def greedy_logprobs(model: Any, prompt: Sequence[int]) -> list[float]:
    """Log-probabilities of the next token after `prompt` (the probe's measurement)."""
    import torch

    with torch.no_grad():
        logits = model(torch.tensor([list(prompt)])).logits[0, -1]
    return torch.log_softmax(logits.float(), dim=-1).tolist()


def probe_adapter(path: Path, base: Path, n_threads: int, chat_template: str | None = None) -> dict[str, Any]:
    """Greedy next-token logprobs of a fixed prompt with the adapter on and off; the
    result goes into the summary, with a warning when the adapter changes nothing."""
    model = load_model(path, base, n_threads)
    tokenizer = chat_tokenizer_for(path, base, chat_template)
    prompt = tokenizer.render(PROBE_MESSAGES, None, True)
    with model.disable_adapter():
        base_lp = greedy_logprobs(model, prompt)
    adapter_lp = greedy_logprobs(model, prompt)
    live = adapter_is_live(base_lp, adapter_lp)
    result: dict[str, Any] = {
        "live": live,
        "prompt_tokens": len(prompt),
        "max_abs_logprob_diff": max(abs(a - b) for a, b in zip(base_lp, adapter_lp, strict=True)),
        "base_argmax": max(range(len(base_lp)), key=base_lp.__getitem__),
        "adapter_argmax": max(range(len(adapter_lp)), key=adapter_lp.__getitem__),
    }
    if not live:
        result["warning"] = (
            f"ADAPTER IS NOT LIVE: {path} gives exactly the base model's next-token logprobs "
            "(a zero-initialised or untrained LoRA); these results are the base model's"
        )
    return result


def chat_tokenizer_for(path: Path, base: Path | None, chat_template: str | None = None) -> ChatTokenizer:
    """The adapter's own tokenizer files win (added tokens), else the base's;
    `--chat-template FILE` replaces the folder's template."""
    folder = path if base is None or (path / "tokenizer.json").is_file() else base
    try:
        tokenizer = tokenizer_from_file(folder, chat_template)
    except ValueError as exc:
        raise SamplerError(str(exc).replace("--tokenizer", "--model-path", 1)) from None
    return ChatTokenizer(
        tokenizer.template,
        tokenizer.encode,
        tokenizer.decode,
        bos_token=tokenizer.bos_token,
        eos_token=tokenizer.eos_token,
        label=f"the checkpoint's own tokenizer and chat template ({folder})",
    )


def end_of_sequence_ids(folder: Path) -> list[int]:
    """The stop ids of config.json and generation_config.json (the only field taken from
    generation_config.json: its sampling defaults are never applied)."""
    ids: list[int] = []
    for name in ("generation_config.json", "config.json"):
        try:
            value = json.loads((folder / name).read_text(encoding="utf-8")).get("eos_token_id")
        except (OSError, ValueError):
            continue
        for token in value if isinstance(value, list) else [value]:
            if isinstance(token, int) and token not in ids:
                ids.append(token)
    return ids


def describe_identity(
    path: Path, base: Path | None, n_threads: int, n_ctx: int, batch_rows: int
) -> ModelIdentity:
    """The identity results and cache keys carry: base and adapter hashed separately, and
    the batch size, which sample j may depend on."""
    details: dict[str, Any] = {
        "n_threads": n_threads,
        "n_ctx": n_ctx,
        "dtype": "float32",
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "batch_rows": batch_rows,
        "checkpoint_fingerprint": folder_fingerprint(base or path),
    }
    fingerprint = details["checkpoint_fingerprint"]
    if base is not None:
        details.update(base=str(base), adapter=str(path), adapter_fingerprint=folder_fingerprint(path))
        fingerprint = hashlib.sha256(f"{fingerprint}+{details['adapter_fingerprint']}".encode()).hexdigest()
    return ModelIdentity(
        backend="transformers",
        name=path.name,
        location=str(path),
        fingerprint=fingerprint,
        details=details,
    )


# -- start-up: classification, checks, the summary's description ----------------------
PROBES: dict[tuple[str, str], dict[str, Any]] = {}  # (adapter, base) -> probe_adapter's result


def checkpoint_base(path: Path, base_model: str | None) -> Path | None:
    """A folder with config.json (a checkpoint: None) or adapter_config.json (a LoRA adapter:
    the base it runs on, --base-model or else the base it names). Raises ValueError with one
    line."""
    if not (path / "adapter_config.json").is_file():
        if base_model:
            raise ValueError(f"--base-model is for adapter folders; {path} is a whole checkpoint: drop it")
        return None
    named = adapter_base(path)
    given = base_model or named
    if not given:
        raise ValueError(
            f"--model-path {path}: the adapter names no base_model_name_or_path; give --base-model CKPT_DIR"
        )
    base = Path(given).expanduser()
    if base_model and named and not _same_model(base_model, named):
        raise ValueError(
            f"--base-model {base_model} differs from the base the adapter was trained on ({named}); "
            "pass that base, or drop --base-model"
        )
    if not (base / "config.json").is_file():
        raise ValueError(
            f"base model {given}: not a checkpoint folder with config.json; download it and pass "
            "--base-model DIR"
        )
    return base


def _same_model(given: str, named: str) -> bool:
    """Two local folders compare by where they resolve; a hub id and a folder cannot be
    compared here and are accepted (both are recorded in the summary)."""
    first, second = Path(given).expanduser(), Path(named).expanduser()
    if first.exists() and second.exists():
        return first.resolve() == second.resolve()
    if first.exists() != second.exists():
        return True
    return given == named


def check_checkpoint(
    path: Path, base: Path | None, n_threads: int, chat_template: str | None = None, strict: bool = False
) -> None:
    """Start-up: imports, the chat template, and (for an adapter) the is-live probe,
    whose model load the sampler in this process then reuses; `strict`
    (--strict-adapter) makes a dead adapter an error."""
    check_installed()
    try:
        chat_tokenizer_for(path, base, chat_template)
    except SamplerError as exc:
        raise ValueError(str(exc)) from None
    if base is not None:
        try:
            result = PROBES[(str(path), str(base))] = probe_adapter(path, base, n_threads, chat_template)
        except Exception as exc:  # noqa: BLE001 - any loader failure: one line, not a traceback
            first = (str(exc).strip().splitlines() or [""])[0][:200]
            raise ValueError(
                f"--model-path {path}: transformers/peft cannot load it on {base} "
                f"({type(exc).__name__}: {first}); check the adapter and --base-model"
            ) from None
        if not result["live"]:
            if strict:
                raise ValueError(f"{result['warning']} (--strict-adapter)")
            import sys

            sys.stderr.write(f"agenteval: WARNING: {result['warning']}\n")


def describe_checkpoint(path: Path | None, base: Path | None, settings: Any) -> dict[str, Any]:
    """Model identity for the summary, without loading the model."""
    assert path is not None
    try:
        identity = describe_identity(path, base, settings.llama_threads, settings.n_ctx, settings.val_n)
    except OSError as exc:  # the folder went away mid-run: the results are still written
        return {"name": path.name, "path": str(path), "error": f"cannot hash the model folder: {exc}"}
    info = {k: v for k, v in identity.as_dict().items() if k != "backend"}
    info.update(
        path=str(path),
        token_counter="the checkpoint's own tokenizer and chat template (token-in/token-out)",
        batching="the N samples of a prompt form one batch of batch_rows rows, each seeded on its own",
    )
    probe = PROBES.get((str(path), str(base))) if base is not None else None
    if probe is not None:
        info["adapter_probe"] = probe
        if not probe["live"]:
            info["warning"] = probe["warning"]
    return info
