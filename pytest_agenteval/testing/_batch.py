"""OpenAI's Batch API on the test server: `/v1/files` (upload, metadata, content) and
`/v1/batches` (create, retrieve, list, cancel), with the life of a real batch: validating,
in_progress (requests answered one by one, `request_counts` moving), finalizing, then
completed, expired (some requests never ran: `batch_expired` error lines) or cancelled;
partial failures as error-file lines; a per-file request limit. Each request of a batch
is answered as `/v1/chat/completions` would answer it (the same responder, the same
validation), without latency or faults, and is not in the live request log: `stats()["batch"]`
counts it instead."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiohttp import web

from pytest_agenteval.testing._faults import unit_draw

BATCH_ENDPOINT = "/v1/chat/completions"
COMPLETION_WINDOW = "24h"
TERMINAL = ("completed", "expired", "cancelled", "failed")

# (body) -> (HTTP status, JSON reply): how the server answers one chat request
Answer = Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]
# (request) -> an error response, or None when the caller may go on (authorization)
Guard = Callable[[web.Request], web.Response | None]


@dataclass
class BatchConfig:
    """How batches behave. Defaults: a batch runs at once and completes, nothing fails.
    The fields are read while a batch runs, so a test may change them midway."""

    validating_s: float = 0.0  # time in `validating`
    request_ms: float = 0.0  # time `in_progress` spends on each request
    finalizing_s: float = 0.0  # time in `finalizing`
    # the first `expire_batches` batches created answer `expire_after` requests, then expire
    expire_after: int | None = None
    expire_batches: int = 1
    # partial failures: a request's attempt (the how-many-th time its body is in a batch)
    # fails with `fail_status` when it is below `fail_first_k`, or by a hash draw < fail_rate
    fail_first_k: int = 0
    fail_rate: float = 0.0
    fail_seed: int = 0
    fail_status: int = 500
    max_requests_per_file: int = 50_000  # more lines: the batch fails validation


@dataclass
class _File:
    id: str
    purpose: str
    filename: str
    content: bytes
    created_at: int

    def entry(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.content),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
        }


@dataclass
class _Batch:
    id: str
    input_file_id: str
    metadata: dict[str, Any]
    created_at: int
    order: int  # the how-many-th batch created (from 0)
    status: str = "validating"
    counts: Counter[str] = field(default_factory=Counter)
    times: dict[str, int | None] = field(default_factory=dict)
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[dict[str, Any]] | None = None
    cancel: bool = False

    def entry(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": BATCH_ENDPOINT,
            "errors": None if self.errors is None else {"object": "list", "data": self.errors},
            "input_file_id": self.input_file_id,
            "completion_window": COMPLETION_WINDOW,
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": self.created_at,
            "expires_at": self.created_at + 24 * 3600,
            **{f"{name}_at": self.times.get(name) for name in _STAMPS},
            "request_counts": {
                "total": self.counts["total"],
                "completed": self.counts["completed"],
                "failed": self.counts["failed"],
            },
            "metadata": self.metadata,
        }


_STAMPS = ("in_progress", "finalizing", "completed", "failed", "expired", "cancelling", "cancelled")


def _error_payload(message: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}


def _error(status: int, message: str, code: str | None = None) -> web.Response:
    return web.json_response(_error_payload(message, code), status=status)


_Stored = TypeVar("_Stored")


def _by_id(table: dict[str, _Stored], kind: str, request: web.Request) -> _Stored:
    """The File or Batch the path's {id} names; else OpenAI's 404, raised (aiohttp sends it)."""
    stored = table.get(request.match_info["id"])
    if stored is None:
        message = f"No such {kind} object: {request.match_info['id']}"
        raise web.HTTPNotFound(text=json.dumps(_error_payload(message)), content_type="application/json")
    return stored


class BatchService:
    """The files and batches of one server, and their statistics."""

    def __init__(self, config: BatchConfig, answer: Answer, guard: Guard, request_key: Callable) -> None:
        self.config = config
        self._answer = answer
        self._guard = guard
        self._key = request_key
        self.files: dict[str, _File] = {}
        self.batches: dict[str, _Batch] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)
        self._attempts = Counter[str]()  # request key -> times it ran in a batch
        self.counts = Counter[str]()

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/files", self._guarded(self._upload))
        app.router.add_get("/v1/files/{id}", self._guarded(self._file))
        app.router.add_get("/v1/files/{id}/content", self._guarded(self._content))
        app.router.add_post("/v1/batches", self._guarded(self._create))
        app.router.add_get("/v1/batches", self._guarded(self._list))
        app.router.add_get("/v1/batches/{id}", self._guarded(self._retrieve))
        app.router.add_post("/v1/batches/{id}/cancel", self._guarded(self._cancel))

    def _guarded(
        self, handler: Callable[[web.Request], Awaitable[web.Response]]
    ) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def guarded(request: web.Request) -> web.Response:
            denied = self._guard(request)
            return denied if denied is not None else await handler(request)

        return guarded

    def stats(self) -> dict[str, Any]:
        """files_uploaded, batches_created, requests answered (ok lines), failed (error
        lines with a status) and expired or cancelled (never ran), batches by status."""
        return {
            "files_uploaded": self.counts["files_uploaded"],
            "batches_created": self.counts["batches_created"],
            "requests_answered": self.counts["requests_answered"],
            "requests_failed": self.counts["requests_failed"],
            "requests_not_run": self.counts["requests_not_run"],
            "statuses": dict(Counter(b.status for b in self.batches.values())),
        }

    def reset(self) -> None:
        """Clear the counters and attempt numbers; files and batches stay."""
        self.counts.clear()
        self._attempts.clear()

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}-mock{next(self._ids):06d}"

    def _store(self, purpose: str, filename: str, content: bytes) -> _File:
        stored = _File(self._new_id("file"), purpose, filename, content, int(time.time()))
        self.files[stored.id] = stored
        return stored

    # -- files ---------------------------------------------------------------------------
    async def _upload(self, request: web.Request) -> web.Response:
        try:
            form = await request.post()
        except ValueError:
            return _error(400, "expected a multipart/form-data body with `purpose` and `file`")
        purpose, upload = form.get("purpose"), form.get("file")
        if purpose != "batch":
            return _error(400, f"purpose must be 'batch' here, got {purpose!r}")
        if not isinstance(upload, web.FileField):
            return _error(400, "the form has no `file` part")
        stored = self._store("batch", upload.filename or "upload.jsonl", upload.file.read())
        self.counts["files_uploaded"] += 1
        return web.json_response(stored.entry())

    async def _file(self, request: web.Request) -> web.Response:
        return web.json_response(_by_id(self.files, "File", request).entry())

    async def _content(self, request: web.Request) -> web.Response:
        stored = _by_id(self.files, "File", request)
        return web.Response(body=stored.content, content_type="application/octet-stream")

    # -- batches -------------------------------------------------------------------------
    async def _create(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "We could not parse the JSON body of your request.")
        if not isinstance(body, dict) or body.get("input_file_id") not in self.files:
            return _error(
                404, f"No such File object: {body.get('input_file_id') if isinstance(body, dict) else ''}"
            )
        if body.get("endpoint") != BATCH_ENDPOINT:
            return _error(400, f"endpoint must be {BATCH_ENDPOINT!r} here, got {body.get('endpoint')!r}")
        if body.get("completion_window") != COMPLETION_WINDOW:
            return _error(400, f"completion_window must be {COMPLETION_WINDOW!r}")
        batch = _Batch(
            self._new_id("batch"),
            body["input_file_id"],
            dict(body.get("metadata") or {}),
            int(time.time()),
            self.counts["batches_created"],
        )
        self.counts["batches_created"] += 1
        self.batches[batch.id] = batch
        task = asyncio.ensure_future(self._run(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return web.json_response(batch.entry())

    async def _retrieve(self, request: web.Request) -> web.Response:
        return web.json_response(_by_id(self.batches, "Batch", request).entry())

    async def _list(self, request: web.Request) -> web.Response:
        data = [b.entry() for b in reversed(self.batches.values())]
        return web.json_response({"object": "list", "data": data, "has_more": False})

    async def _cancel(self, request: web.Request) -> web.Response:
        batch = _by_id(self.batches, "Batch", request)
        if batch.status in TERMINAL:
            return _error(409, f"Cannot cancel a batch with status {batch.status!r}")
        batch.cancel = True
        self._enter(batch, "cancelling")
        return web.json_response(batch.entry())

    # -- a batch's life --------------------------------------------------------------------
    def _enter(self, batch: _Batch, status: str) -> None:
        batch.status = status
        batch.times[status] = int(time.time())

    async def _run(self, batch: _Batch) -> None:
        cfg = self.config
        await asyncio.sleep(cfg.validating_s)
        lines, problem = self._validate(self.files[batch.input_file_id].content)
        if problem is not None:
            batch.errors = [problem]
            self._enter(batch, "failed")
            return
        if not batch.cancel:
            self._enter(batch, "in_progress")
        batch.counts["total"] = len(lines)
        output: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        expires = cfg.expire_after is not None and batch.order < cfg.expire_batches
        ran = 0
        for line in lines:
            if batch.cancel or (expires and ran >= (cfg.expire_after or 0)):
                break
            await asyncio.sleep(cfg.request_ms / 1000.0)
            ran += 1
            status, reply = self._one(line["body"])
            result = {
                "id": self._new_id("batch_req"),
                "custom_id": line["custom_id"],
                "response": {"status_code": status, "request_id": self._new_id("req"), "body": reply},
                "error": None,
            }
            (output if status == 200 else errors).append(result)
            batch.counts["completed" if status == 200 else "failed"] += 1
            self.counts["requests_answered" if status == 200 else "requests_failed"] += 1
        end = "cancelled" if batch.cancel else "expired" if ran < len(lines) else "completed"
        code, message = _NOT_RUN[end]
        for line in lines[ran:]:
            errors.append(
                {
                    "id": self._new_id("batch_req"),
                    "custom_id": line["custom_id"],
                    "response": None,
                    "error": {"code": code, "message": message},
                }
            )
            self.counts["requests_not_run"] += 1
        if end == "completed":
            self._enter(batch, "finalizing")
            await asyncio.sleep(cfg.finalizing_s)
        if output:
            batch.output_file_id = self._store("batch_output", f"{batch.id}_output.jsonl", _jsonl(output)).id
        if errors:
            batch.error_file_id = self._store("batch_output", f"{batch.id}_error.jsonl", _jsonl(errors)).id
        self._enter(batch, end)

    def _validate(self, content: bytes) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """The input file's requests, or the first problem found (as OpenAI reports it)."""
        lines: list[dict[str, Any]] = []
        seen: set[str] = set()
        for number, raw in enumerate(content.splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except ValueError:
                return [], _problem("invalid_json_line", "This line is not parseable as valid JSON.", number)
            if not isinstance(line, dict) or not isinstance(line.get("body"), dict):
                return [], _problem(
                    "invalid_request", "Each line needs custom_id, method, url and body.", number
                )
            if line.get("url") != BATCH_ENDPOINT or line.get("method") != "POST":
                return [], _problem("invalid_url", f"The URL must be POST {BATCH_ENDPOINT}.", number)
            custom_id = line.get("custom_id")
            if not isinstance(custom_id, str) or custom_id in seen:
                return [], _problem("duplicate_custom_id", "custom_id must be a unique string.", number)
            seen.add(custom_id)
            lines.append(line)
        limit = self.config.max_requests_per_file
        if len(lines) > limit:
            message = f"The batch input file has {len(lines)} requests, over the limit of {limit}."
            return [], _problem("too_many_requests", message, None)
        return lines, None

    def _one(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        cfg = self.config
        key = self._key(body)
        attempt = self._attempts[key]
        self._attempts[key] += 1
        if attempt < cfg.fail_first_k or unit_draw(cfg.fail_seed, key, attempt, "batch") < cfg.fail_rate:
            message = "The server had an error while processing your request (injected fault)."
            return cfg.fail_status, {"error": {"message": message, "type": "server_error", "code": None}}
        return self._answer(body)


_NOT_RUN = {
    "expired": ("batch_expired", "This request could not be executed before the completion window expired."),
    "cancelled": ("batch_cancelled", "This request was not executed because the batch was cancelled."),
    "completed": ("", ""),
}


def _problem(code: str, message: str, line: int | None) -> dict[str, Any]:
    return {"code": code, "message": message, "param": None, "line": line}


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(row).encode() + b"\n" for row in rows)
