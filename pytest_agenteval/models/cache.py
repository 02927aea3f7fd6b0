"""The generation cache: every finished completion (and sandbox observation) on disk,
keyed by model identity, exact messages, every sampling parameter and the seed.

Storage is append-only JSONL segments, one per writing process (`<key>\\t<json>\\t<crc32>`
lines), so any number of xdist workers, or machines sharing the folder, write without
locks. A torn last line (a killed process) is skipped when read; so is a corrupted line
anywhere in a segment (bad checksum, no key, NUL blocks a crash left), and that is said
once per segment: those generations are simply requested again. A write that fails (the
disk is full, the folder went read-only) stops caching for the run with one note; the
generation itself is kept and the run goes on.

Readers never take half an entry: a line counts only once whole (its newline is the last
byte written) and its checksum matches; a segment is only ever appended to, or removed
whole (models/cache_folder.py: where the folder is, `pytest-agenteval cache`)."""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import os
import socket
import threading
import uuid
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_agenteval.api.sampler import (
    Completion,
    Message,
    RequestCollected,
    SamplingParams,
    ToolCall,
    collecting_requests,
    note_served,
    served_by,
)

KEY_LENGTH = 64  # hex sha256
# This run's token under --batch (plugin/batching.py; the same on every xdist worker): an
# entry a batch stored in this run carries it, and reads as paid by this run (`via: batch`),
# not as a cache hit; a later run, with another token, reads it as a cache hit.
_batch_run: str | None = None


def set_batch_run(token: str | None) -> None:
    global _batch_run
    _batch_run = token


def batch_run() -> str | None:
    return _batch_run


def _digest(payload: Any) -> str:
    canonical = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class GenerationCache:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._index: dict[str, tuple[Path, int, int]] = {}  # key -> (segment, offset, length)
        self._offsets: dict[Path, int] = {}
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._segment = directory / f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"
        self.hits = 0
        self.writes = 0
        self.notes: list[str] = []  # storage problems, one line each, for the summary
        self._broken: str | None = None  # why writing stopped
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self._stop(exc)
        self.refresh()

    def refresh(self) -> None:
        """Index lines other processes appended since the last look."""
        with self._lock:
            for segment in sorted(self.directory.glob("*.jsonl")):
                try:
                    self._scan(segment)
                except OSError as exc:  # unreadable: its generations are requested again
                    self._note(f"cache segment {segment}: not readable ({exc.strerror or exc}); skipped")

    def _scan(self, segment: Path) -> None:
        start = self._offsets.get(segment, 0)
        corrupt = 0
        with segment.open("rb") as handle:
            handle.seek(start)
            offset = start
            for line in handle:
                if not line.endswith(b"\n"):
                    break  # torn write: ignore it and everything after
                body = line.lstrip(b"\0")  # a crash can leave NUL blocks before a good line
                where = _entry(body, offset + len(line) - len(body))
                if where is None or len(body) < len(line):
                    corrupt += 1  # a NUL block stands where some entry was
                if where is not None:
                    self._index[where[0]] = (segment, where[1], where[2])
                offset += len(line)
        self._offsets[segment] = offset
        if corrupt:
            self._note(
                f"cache segment {segment}: {corrupt} corrupt line(s) skipped; "
                "those generations are requested again"
            )

    def _note(self, line: str) -> None:
        if line not in self.notes:
            self.notes.append(line)

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, key: object) -> bool:
        """Whether `key` has an entry (not a hit: nothing is read)."""
        with self._lock:
            return key in self._index

    def get(self, key: str) -> Any:
        with self._lock:
            where = self._index.get(key)
        if where is None:
            return None
        segment, offset, length = where
        try:
            with segment.open("rb") as handle:
                handle.seek(offset)
                value = json.loads(handle.read(length))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            self._note(f"cache segment {segment}: an unreadable entry was requested again")
            return None
        self.hits += 1
        return value

    def put(self, key: str, value: Any) -> None:
        """Append one entry; a failing disk stops caching (one note), never the run."""
        payload = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
        line = key.encode("ascii") + b"\t" + payload + b"\t%08x\n" % zlib.crc32(payload)
        with self._lock:
            if self._broken is not None:
                return
            try:
                if self._fd is None:
                    self._fd = os.open(self._segment, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                    hold_segment(self._fd)
                    self._offsets[self._segment] = 0
                offset = self._offsets[self._segment]
                written = os.write(self._fd, line)  # one write of a whole line: no interleaving
                if written != len(line):  # a full disk took part of the line
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            except OSError as exc:
                self._stop(exc)
                return
            self._offsets[self._segment] = offset + len(line)
            self._index[key] = (self._segment, offset + KEY_LENGTH + 1, len(payload))
            self.writes += 1

    def _stop(self, exc: OSError) -> None:
        self._broken = exc.strerror or str(exc)
        self._note(
            f"the generation cache in {self.directory} could not be written "
            f"({self._broken}): caching stopped there; this run's results are "
            "complete, a rerun requests again only what was not cached"
        )

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    # -- keys and values ------------------------------------------------------------
    @staticmethod
    def completion_key(
        model: Mapping[str, Any],
        messages: Sequence[Message],
        params: SamplingParams,
        tools: Sequence[Mapping[str, Any]] | None,
    ) -> str:
        return _digest(
            {
                "model": model,
                "messages": [dict(m) for m in messages],
                "params": params.as_dict(),
                "tools": [dict(t) for t in tools or ()],
            }
        )

    @staticmethod
    def tool_key(
        suite: str, problem_id: str, sample_seed: int, call_index: int, code: str, sandbox: Any = None
    ) -> str:
        return _digest({"tool": [suite, problem_id, sample_seed, call_index, code], "sandbox": sandbox})

    def get_tool(self, key: str) -> Any:
        from pytest_agenteval.sandbox import ExecutionResult

        value = self.get(key)
        if value is None:
            return None
        value.pop("cached", None)
        return _Cached(ExecutionResult(**value))

    def put_tool(self, key: str, result: Any) -> None:
        self.put(key, dataclasses.asdict(result))


def hold_segment(fd: int) -> None:
    """A shared lock on a segment while its process writes it, released when the fd closes:
    `pytest-agenteval cache clear` leaves a segment it cannot lock (models/cache_folder.py).
    Where flock is missing or refused (Windows, some network file systems): no lock."""
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except (ImportError, OSError):
        pass


def segment_in_use(path: Path) -> bool:
    """Whether a running process holds `path` (hold_segment)."""
    try:
        import fcntl
    except ImportError:
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


def _entry(line: bytes, offset: int) -> tuple[str, int, int] | None:
    """(key, value offset, value length) of one whole line at offset, None if corrupt.
    Lines without a checksum (older caches) are taken as they are."""
    if len(line) <= KEY_LENGTH + 2 or line[KEY_LENGTH] != 0x09:  # tab
        return None
    key = line[:KEY_LENGTH]
    if key.translate(None, b"0123456789abcdef"):
        return None  # not a hex digest
    end = len(line) - 1  # the newline
    if end - KEY_LENGTH > 10 and line[end - 9] == 0x09:
        try:
            crc = int(line[end - 8 : end], 16)
        except ValueError:
            return None
        end -= 9
        if crc != zlib.crc32(memoryview(line)[KEY_LENGTH + 1 : end]):
            return None
    return key.decode("ascii"), offset + KEY_LENGTH + 1, end - KEY_LENGTH - 1


class _Cached:
    """A cached ExecutionResult that says it came from the cache."""

    cached = True

    def __init__(self, result: Any) -> None:
        self._result = result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._result, name)


def _completion_to_dict(completion: Completion) -> dict[str, Any]:
    data = dataclasses.asdict(completion)
    data["tool_calls"] = [dataclasses.asdict(call) for call in completion.tool_calls]
    return data


_COMPLETION_FIELDS = frozenset(f.name for f in dataclasses.fields(Completion))


def _completion_from_dict(data: Mapping[str, Any]) -> Completion:
    fields = {k: v for k, v in data.items() if k in _COMPLETION_FIELDS}  # a newer version's extras
    fields["tool_calls"] = tuple(ToolCall(**call) for call in fields.get("tool_calls", ()))
    fields["token_ids"] = tuple(fields.get("token_ids", ()))
    fields.update(attempts=0, cached=True)
    return Completion(**fields)


def reasoning_key(inner: Any) -> dict[str, Any]:
    """The part of a sampler's cache key its reasoning split adds ({} for the defaults)."""
    think = getattr(inner, "think", None)
    if think is None:
        return {}
    key = dict(think.cache_key())
    if getattr(inner, "extra_body", None) is not None:  # an endpoint: --thinking is in its body
        key.pop("thinking", None)
    return {"reasoning": key} if key else {}


def _where(inner: Any, revision: str) -> str:
    """The endpoint URL, in the key unless --model-revision names the weights: then two
    servers of those weights (other ports, 127.0.0.1 or localhost) share the cache. What a
    server reports (`root` in /v1/models) is the path or hub id it was started with, not the
    weights in it: /ckpt/latest holds step-100 today and step-200 tomorrow, so it alone never
    lets two addresses share entries. A launched server's port changes every run: "launched"."""
    identity = inner.identity
    if identity.backend != "openai" or identity.location == "launched":
        return identity.location if identity.backend == "openai" else ""
    return "" if revision else identity.location


class CachingSampler:
    """Wraps a sampler: serve finished completions from the cache, store new ones.
    `revision` (--model-revision) names the weights where nothing else does."""

    def __init__(self, inner: Any, cache: GenerationCache, revision: str = "") -> None:
        self.inner = inner
        self.cache = cache
        self.identity = inner.identity
        self.native_tools = inner.native_tools
        self._model_key = {
            "backend": inner.identity.backend,
            "name": inner.identity.name,
            "location": _where(inner, revision),
            "fingerprint": inner.identity.fingerprint,
            # sent with every request (e.g. chat_template_kwargs): changes the output
            "extra_body": dict(getattr(inner, "extra_body", {}) or {}),
            # bumped when a backend's sampling changes (in-process: own template, min_p off)
            "sampling_version": getattr(inner, "sampling_version", 1),
            # the user's name for the weights: only when given, so other keys stay as they were
            **({"revision": revision} if revision else {}),
            # --think-tags (a completion is stored split) and, in-process, --thinking (the
            # template renders with it; endpoints have it in extra_body): only when not the
            # defaults, so every other key stays as it was
            **reasoning_key(inner),
        }
        # the inner sampler's reasoning split: for a batch's raw answers as they are stored,
        # and for entries stored before completions carried their reasoning, as they are read
        self._reasoning_split = getattr(inner, "reasoning_split", None)
        self._records_served = bool(getattr(inner, "records_served", False))
        self.supports_n = getattr(inner, "supports_n", False)
        self.token_io = getattr(inner, "token_io", False)
        self.counter = getattr(inner, "counter", None)

    def chat_tokenizer(self) -> Any:
        return self.inner.chat_tokenizer()

    def _hit(self, data: Mapping[str, Any]) -> Completion:
        completion = _completion_from_dict(data)
        if "reasoning" not in data and self._reasoning_split is not None:
            completion = self._reasoning_split(completion)
        batch = data.get("batch")
        if isinstance(batch, Mapping):  # a batch answered it: billed at the batch price
            this_run = _batch_run is not None and batch.get("run") == _batch_run
            if this_run:  # paid by this run, not an earlier one's cache hit
                completion = dataclasses.replace(completion, cached=False)
            seen = served_by.get()
            if seen is not None and self._records_served:
                seen.update(
                    {"batch_id": str(batch.get("id") or ""), **({"via": "batch"} if this_run else {})}
                )
        if self._records_served:  # what generated it then, recorded as a fresh reply's would be
            note_served(completion)
        return completion

    async def complete_tokens(self, prompt: Sequence[int], params: SamplingParams) -> Completion:
        key = _digest({"model": self._model_key, "prompt_ids": list(prompt), "params": params.as_dict()})
        hit = self.cache.get(key)
        if hit is not None:
            return self._hit(hit)
        if collecting_requests.get() is not None:
            raise RequestCollected  # token ids go to /v1/completions, which a chat batch cannot carry
        completion = await self.inner.complete_tokens(prompt, params)
        self.cache.put(key, _completion_to_dict(completion))
        return completion

    def chat_key(
        self,
        messages: Sequence[Message],
        params: SamplingParams,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | None = None,
    ) -> str:
        """The cache key of `complete(messages, params, tools, tool_choice)`."""
        model = {**self._model_key, "tool_choice": tool_choice} if tool_choice else self._model_key
        return self.cache.completion_key(model, messages, params, tools)

    def n_key(self, messages: Sequence[Message], params: SamplingParams, n: int) -> str:
        """The cache key of `complete_n(messages, params, n)`."""
        return self.cache.completion_key({**self._model_key, "n": n}, messages, params, None)

    def store(self, key: str, completions: Sequence[Completion], n: int | None, batch_id: str = "") -> None:
        """Cache what a request answered elsewhere (a batch): one completion under a
        `chat_key`, or the `n` of an `n_key`, each marked with the batch and this run."""
        if self._reasoning_split is not None:  # a batch's raw reply, split as a live one is
            completions = [self._reasoning_split(c) for c in completions]
        marked = [
            {**_completion_to_dict(c), "batch": {"id": batch_id, "run": _batch_run}} for c in completions
        ]
        self.cache.put(key, marked[0] if n is None else marked[:n])

    def _collect(self, key: str, body: Any) -> None:
        """While --batch gathers requests (`collecting_requests`), a miss is recorded and
        raises RequestCollected instead of being sent."""
        found = collecting_requests.get()
        if found is None:
            return
        if hasattr(self.inner, "body"):  # an OpenAI-protocol sampler: its body goes in a batch
            found.append((self, key, body()))
        raise RequestCollected

    async def complete(
        self,
        messages: Sequence[Message],
        params: SamplingParams,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | None = None,
    ) -> Completion:
        key = self.chat_key(messages, params, tools, tool_choice)
        hit = self.cache.get(key)
        if hit is not None:
            return self._hit(hit)
        self._collect(key, lambda: self.inner.body(messages, params, tools, tool_choice))
        extra = {"tool_choice": tool_choice} if tool_choice else {}
        completion = await self.inner.complete(messages, params, tools, **extra)
        self.cache.put(key, _completion_to_dict(completion))
        return completion

    async def complete_n(
        self, messages: Sequence[Message], params: SamplingParams, n: int
    ) -> list[Completion]:
        key = self.n_key(messages, params, n)
        hit = self.cache.get(key)
        if hit is not None:
            return [self._hit(item) for item in hit]
        self._collect(key, lambda: {**self.inner.body(messages, params), "n": n})
        completions = await self.inner.complete_n(messages, params, n)
        self.cache.put(key, [_completion_to_dict(c) for c in completions])
        return completions

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def stats(self) -> dict[str, Any]:
        return {**self.inner.stats(), "cache_hits": self.cache.hits, "cache_writes": self.cache.writes}

    async def aclose(self) -> None:
        await self.inner.aclose()
        self.cache.close()
