"""In-process transformers models: the fallback where no inference server can be launched
(no vLLM, no GPU). A checkpoint folder, or a peft LoRA adapter on top of its base.

Why it is built this way:
- `generate()` samples on torch's *global* RNG, so N samples in one batch would share one
  random stream and each would depend on its neighbours. Here every row has its own
  `torch.Generator(seed_j)`, driven by a logits processor that does the sampling itself
  (temperature, top-k, top-p; min-p off) while `generate()` runs greedy on its output.
- The checkpoint's `generation_config.json` would silently add sampling defaults
  (repetition penalties, top-k 50...): every call passes an explicit, neutral
  `GenerationConfig`; only the end-of-sequence ids are taken from the checkpoint.
- The N samples of one problem have identical first prompts: they are gathered into one
  batch of N rows (no padding), which is where a CPU gets its speed-up. Sample j depends
  on (model, prompt, seed_j) and on the batch size N, which the identity records.
- One model per process on one executor thread: torch's intra-op threads are the
  parallelism (`--llama-threads`), as llama.cpp's are for the GGUF backend."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pytest_agenteval.api.sampler import Completion, Message, ModelIdentity, SamplerError, SamplingParams
from pytest_agenteval.models._llama import file_fingerprint
from pytest_agenteval.models._template import ChatTokenizer, TemplateError, tokenizer_from_file
from pytest_agenteval.models.serve.probe import adapter_is_live

INSTALL_HINT = (
    "install torch first (pip install torch==2.13.0; a CPU build here, plain `pip install torch` "
    "elsewhere pulls CUDA), then: pip install 'pytest-agenteval[transformers]'"
)
GATHER_S = 0.05  # a batch waits this long after its last arrival for more rows of its prompt
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


class _RowSampler:
    """A logits processor sampling each row from its own generator. It returns a row that
    is -inf except at the token it drew, so `generate()` (greedy) takes exactly that token.
    Temperature 0 leaves the row alone: greedy."""

    def __init__(self, params: Sequence[SamplingParams]) -> None:
        import torch

        self.params = list(params)
        self.generators = [torch.Generator().manual_seed(p.seed % (1 << 63)) for p in params]

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        out = torch.full_like(scores, -float("inf"))
        for row, (params, generator) in enumerate(zip(self.params, self.generators, strict=True)):
            logits = scores[row].float()
            if params.temperature <= 0:
                out[row, int(torch.argmax(logits))] = 0.0
                continue
            logits = logits / params.temperature
            if 0 < params.top_k < logits.numel():
                kth = torch.topk(logits, params.top_k).values[-1]
                logits = logits.masked_fill(logits < kth, -float("inf"))
            if params.top_p < 1.0:
                ordered, order = torch.sort(logits, descending=True)
                cumulative = torch.cumsum(torch.softmax(ordered, dim=-1), dim=-1)
                drop = cumulative > params.top_p
                drop[1:] = drop[:-1].clone()  # keep the token that crosses top_p
                drop[0] = False
                logits = logits.masked_fill(torch.zeros_like(drop).scatter(0, order, drop), -float("inf"))
            token = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)
            out[row, int(token)] = 0.0
        return out


@dataclasses.dataclass
class _Gathering:
    """Requests with one prompt and one set of parameters (seeds aside), waiting to run
    as one batch."""

    prompt: list[int]
    rows: list[tuple[SamplingParams, asyncio.Future[Completion]]]
    timer: asyncio.TimerHandle | None = None


class TransformersSampler:
    """A transformers checkpoint (or base + peft adapter) in this process."""

    native_tools = False
    token_io = True  # complete_tokens: continue from sampled ids
    sampling_version = 1

    def __init__(
        self,
        path: Path,
        *,
        base: Path | None = None,
        n_threads: int = 1,
        n_ctx: int = 8192,
        batch_rows: int = 1,
        chat_template: str | None = None,
    ) -> None:
        self.path = path
        self.base = base
        self.chat_template = chat_template
        self.n_threads = n_threads
        self.n_ctx = n_ctx
        self.batch_rows = max(1, batch_rows)
        self.identity = describe_identity(path, base, n_threads, n_ctx, self.batch_rows)
        self._tokenizer: ChatTokenizer | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agenteval-hf")
        self._cancel = threading.Event()
        self._open: dict[Any, _Gathering] = {}
        self._stop_ids = end_of_sequence_ids(base or path)
        self._generated_tokens = 0
        self._generate_seconds = 0.0
        self._batches = 0
        self._rows = 0

    # -- tokenizer -----------------------------------------------------------------------
    def chat_tokenizer(self) -> ChatTokenizer:
        if self._tokenizer is None:
            self._tokenizer = chat_tokenizer_for(self.path, self.base, self.chat_template)
        return self._tokenizer

    def count_tokens(self, text: str) -> int:
        return len(self.chat_tokenizer().encode(text))

    # -- generation ----------------------------------------------------------------------
    def _generate_batch(self, prompt: list[int], rows: list[SamplingParams]) -> list[Completion]:
        """One `generate()` for all rows of one prompt (identical, so no padding)."""
        import torch
        from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

        model = load_model(self.path, self.base, self.n_threads)
        room = self.n_ctx - len(prompt)
        if room <= 0:
            raise ValueError(f"the prompt is {len(prompt)} tokens, over the context of {self.n_ctx}")
        budget = min(max(p.max_tokens for p in rows), room)
        config = GenerationConfig(
            do_sample=False,  # the row sampler draws; generate() takes its one finite token
            max_new_tokens=budget,
            eos_token_id=self._stop_ids or None,
            pad_token_id=self._stop_ids[0] if self._stop_ids else 0,
            repetition_penalty=1.0,
            num_beams=1,
            temperature=None,
            top_p=None,
            top_k=None,
        )
        row_stop = _RowStop(self, rows, len(prompt))
        start = time.perf_counter()
        with torch.no_grad():
            sequences = model.generate(
                input_ids=torch.tensor([prompt] * len(rows)),
                attention_mask=torch.ones((len(rows), len(prompt)), dtype=torch.long),
                generation_config=config,
                logits_processor=LogitsProcessorList([_RowSampler(rows)]),
                stopping_criteria=StoppingCriteriaList([row_stop]),
            )
        elapsed = time.perf_counter() - start
        completions = [
            self._completion(
                sequences[row, len(prompt) :][: row_stop.ended.get(row)].tolist(),
                params,
                len(prompt),
                elapsed,
            )
            for row, params in enumerate(rows)
        ]
        self._batches += 1
        self._rows += len(rows)
        self._generated_tokens += sum(c.completion_tokens for c in completions)
        self._generate_seconds += elapsed
        return completions

    def _completion(
        self, ids: list[int], params: SamplingParams, prompt_len: int, elapsed: float
    ) -> Completion:
        """Cut one row where it ended: at its first stop id (kept in the ids, as llama.cpp's
        backend keeps it), at a stop string, or at its own max_tokens."""
        finish = "length"
        for index, token in enumerate(ids):
            if token in self._stop_ids:
                ids, finish = ids[: index + 1], "stop"
                break
        ids = ids[: params.max_tokens] if finish == "length" else ids
        visible = ids[:-1] if finish == "stop" else ids
        text = self.chat_tokenizer().decode(visible)
        for stop in params.stop:
            if stop in text:
                text, finish = text.split(stop, 1)[0], "stop"
        return Completion(
            text=text,
            finish_reason=finish,
            prompt_tokens=prompt_len,
            completion_tokens=len(ids),
            latency_s=elapsed,
            token_ids=tuple(ids),
        )

    async def _sample(self, prompt: list[int], params: SamplingParams) -> Completion:
        """Join (or open) the gathering for this prompt; it runs when it has N rows, or
        when no row has joined for GATHER_S."""
        loop = asyncio.get_running_loop()
        key = (tuple(prompt), dataclasses.replace(params, seed=0))
        gathering = self._open.get(key)
        if gathering is None:
            gathering = self._open[key] = _Gathering(list(prompt), [])
        future: asyncio.Future[Completion] = loop.create_future()
        gathering.rows.append((params, future))
        if gathering.timer is not None:
            gathering.timer.cancel()
        if len(gathering.rows) >= self.batch_rows:
            self._dispatch(key)
        else:
            gathering.timer = loop.call_later(GATHER_S, self._dispatch, key)
        try:
            return await future
        except (ValueError, TemplateError) as exc:
            raise SamplerError(f"transformers refused the request: {exc}") from exc

    def _dispatch(self, key: Any) -> None:
        gathering = self._open.pop(key, None)
        if gathering is None:
            return
        rows = gathering.rows
        batch = asyncio.get_running_loop().run_in_executor(
            self._executor, self._generate_batch, gathering.prompt, [p for p, _ in rows]
        )

        def hand_out(done: asyncio.Future[list[Completion]]) -> None:
            for index, (_, future) in enumerate(rows):
                if future.done():
                    continue
                if done.cancelled():
                    future.cancel()
                elif done.exception() is not None:
                    future.set_exception(done.exception())  # type: ignore[arg-type]
                else:
                    future.set_result(done.result()[index])

        batch.add_done_callback(hand_out)

    async def complete(
        self,
        messages: Sequence[Message],
        params: SamplingParams,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | None = None,
    ) -> Completion:
        """Chat through the checkpoint's own template (tools passed to it, thinking off);
        tool calls are raw text, as with the GGUF backend."""
        try:
            prompt = self.chat_tokenizer().render([dict(m) for m in messages], tools, True)
        except TemplateError as exc:
            raise SamplerError(f"transformers refused the request: {exc}") from exc
        return await self._sample(prompt, params)

    async def complete_tokens(self, prompt: Sequence[int], params: SamplingParams) -> Completion:
        """Token-in/token-out: sample a continuation of exactly these ids."""
        return await self._sample(list(prompt), params)

    def stats(self) -> dict[str, Any]:
        seconds = self._generate_seconds
        return {
            "generated_tokens": self._generated_tokens,
            "generate_seconds": round(seconds, 3),
            "tokens_per_second": round(self._generated_tokens / seconds, 2) if seconds else 0.0,
            "batches": self._batches,
            "batched_rows": self._rows,
        }

    async def aclose(self) -> None:
        # Stop a batch in progress at its next token rather than wait it out.
        self._cancel.set()
        self._executor.shutdown(wait=False, cancel_futures=True)


class _RowStop:
    """Per-row stopping: a row is done at its own max_tokens or at a stop string; every
    row stops once the sampler closes. `ended` is each such row's length when it ended:
    generate() goes on for the others and fills a done row with pad ids (the end-of-turn
    id), which are not the row's tokens."""

    def __init__(self, sampler: TransformersSampler, rows: Sequence[SamplingParams], prompt_len: int) -> None:
        self.sampler = sampler
        self.rows = list(rows)
        self.prompt_len = prompt_len
        self.ended: dict[int, int] = {}

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        generated = input_ids.shape[1] - self.prompt_len
        done = []
        for row, params in enumerate(self.rows):
            stop = generated >= params.max_tokens
            if params.stop and not stop:
                text = self.sampler.chat_tokenizer().decode(input_ids[row, self.prompt_len :].tolist())
                stop = any(s in text for s in params.stop)
            if stop:
                self.ended.setdefault(row, generated)
            done.append(stop or self.sampler._cancel.is_set())
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


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


def choose_checkpoint(path: Path, base_model: str | None) -> Any:
    """A folder with config.json (a checkpoint) or adapter_config.json (a LoRA adapter,
    on --base-model or else the base it names). Raises ValueError with one line."""
    from pytest_agenteval.models import ModelChoice

    if not (path / "adapter_config.json").is_file():
        if base_model:
            raise ValueError(f"--base-model is for adapter folders; {path} is a whole checkpoint: drop it")
        return ModelChoice("transformers", path=path)
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
    return ModelChoice("transformers", path=path, base=base)


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
