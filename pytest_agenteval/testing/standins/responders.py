"""Answers from llama.cpp on a gguf, for a stand-in that should say what a small real model
says (`AGENTEVAL_STANDIN_GGUF=FILE`, or the install command's `--gguf`): each of the `n`
choices is one generation with the request's sampling and `seed + index`."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from pytest_agenteval.testing._responders import Reply


class LlamaResponder:
    """A responder (body -> replies) over `llama_cpp.Llama` on one gguf, loaded on first use."""

    def __init__(self, path: str | Path, n_ctx: int = 2048, n_threads: int = 1) -> None:
        self.path = Path(path)
        self.n_ctx, self.n_threads = n_ctx, n_threads
        self._llm: Any = None
        self._lock = threading.Lock()

    def _model(self) -> Any:
        if self._llm is None:
            try:
                import llama_cpp
            except ImportError:
                raise RuntimeError(
                    "AGENTEVAL_STANDIN_GGUF needs llama.cpp: pip install llama-cpp-python"
                ) from None
            self._llm = llama_cpp.Llama(
                model_path=str(self.path), n_ctx=self.n_ctx, n_threads=self.n_threads, verbose=False
            )
        return self._llm

    def __call__(self, body: dict[str, Any]) -> list[Reply]:
        n = int(body.get("n") or 1)
        seed = body.get("seed")
        sampling = {
            "max_tokens": int(body.get("max_tokens") or body.get("max_completion_tokens") or 64),
            "temperature": float(body["temperature"]) if body.get("temperature") is not None else 1.0,
            "top_p": float(body["top_p"]) if body.get("top_p") is not None else 1.0,
        }
        replies = []
        with self._lock:  # one model, one generation at a time (llama.cpp's server does the same)
            llm = self._model()
            for index in range(n):
                seeded = {**sampling, "seed": int(seed) + index if isinstance(seed, int) else index}
                if "messages" in body:
                    out = llm.create_chat_completion(messages=body["messages"], **seeded)
                    text = out["choices"][0]["message"].get("content") or ""
                else:
                    prompt = body.get("prompt")
                    out = llm.create_completion(prompt=prompt if isinstance(prompt, str) else "", **seeded)
                    text = out["choices"][0].get("text") or ""
                replies.append(Reply(text=text))
        return replies
