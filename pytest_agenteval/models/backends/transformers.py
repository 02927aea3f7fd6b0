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
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pytest_agenteval.api.sampler import (
    Completion,
    ContextOverflowError,
    Message,
    SamplerError,
    SamplingParams,
)
from pytest_agenteval.models.backends.checkpoint import (
    chat_tokenizer_for,
    describe_identity,
    end_of_sequence_ids,
    load_model,
)
from pytest_agenteval.models.reasoning import ThinkSplit
from pytest_agenteval.models.tokens.template import ChatTokenizer, TemplateError

GATHER_S = 0.05  # a batch waits this long after its last arrival for more rows of its prompt


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
        think: ThinkSplit | None = None,
    ) -> None:
        self.path = path
        self.think = think or ThinkSplit()  # --think-tags and --thinking as given
        self._split: ThinkSplit | None = None  # with the template's tags (reasoning_split)
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
            tokenizer = chat_tokenizer_for(self.path, self.base, self.chat_template)
            tokenizer.enable_thinking = self.think.enable_thinking
            self._split = self.think.with_template(tokenizer.template)
            self._tokenizer = tokenizer
        return self._tokenizer

    def reasoning_split(self, completion: Completion) -> Completion:
        """The reply's reasoning apart from its answer, by the chat template's think tags
        (--think-tags over them), the reasoning's tokens counted by the checkpoint's tokenizer."""
        self.chat_tokenizer()
        assert self._split is not None
        return self._split.apply(completion, self.count_tokens)

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
            raise ContextOverflowError(len(prompt), self.n_ctx, "transformers, --n-ctx")
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
        completion = Completion(
            text=text,
            finish_reason=finish,
            prompt_tokens=prompt_len,
            completion_tokens=len(ids),
            latency_s=elapsed,
            token_ids=tuple(ids),
        )
        return self.reasoning_split(completion)

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
        """Chat through the checkpoint's own template (tools passed to it, --thinking);
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
