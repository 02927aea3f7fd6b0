"""OpenAI's Batch API (`/v1/files`, `/v1/batches`) as a way to fill the generation cache at
about half the price: the requests a run will send, each under its cache key as
`custom_id`, go out as one batch per suite (split at 50,000 requests); the replies come
back into the cache, and the run then reads them from there as it reads any cached
generation. Expired, cancelled and failed (429, 5xx) requests go out again in a new batch,
a bounded number of rounds. The batches sent and not yet collected are listed in the
cache folder (`batches.json`) before any polling, so a run stopped while it waits (Ctrl-C)
leaves them there, and the next run collects them instead of paying again."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agenteval.api.sampler import Completion
from pytest_agenteval.models.http.client import HttpClient
from pytest_agenteval.models.http.replies import Retryable, error_message, parse_completions

MAX_REQUESTS_PER_BATCH = 50_000  # OpenAI's limit on one batch's input file
RESUBMIT_ROUNDS = 3  # new batches for requests that expired or failed, at most
LEDGER_FILE = "batches.json"
ENDPOINT = "/v1/chat/completions"
TERMINAL = frozenset({"completed", "expired", "cancelled", "failed"})
NOT_RUN = frozenset({"batch_expired", "batch_cancelled"})  # error codes of requests never run
CALL_ATTEMPTS = 5  # a file or batch call that meets a connection error, a 429 or a 5xx
MAX_FILE_BYTES = 1 << 40  # an output file is read line by line: its size is no concern


Say = Callable[[str], None]
Store = Callable[[str, list[Completion], "int | None", str], None]  # custom_id, completions, n, batch id


class BatchError(Exception):
    """The batch endpoint refused (no Batch API, a bad file, a failed validation): one line."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status  # the HTTP status of a refusal, if one


@dataclass(frozen=True)
class BatchRequest:
    """One request a batch sends: its generation cache key (the `custom_id`) and the body
    the sampler would send live (`n` in it: the key holds that many completions)."""

    custom_id: str
    body: Mapping[str, Any]

    def line(self) -> bytes:
        row = {"custom_id": self.custom_id, "method": "POST", "url": ENDPOINT, "body": self.body}
        return json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


@dataclass(frozen=True)
class BatchState:
    """What `GET /v1/batches/{id}` says."""

    id: str
    status: str
    total: int = 0
    completed: int = 0
    failed: int = 0
    input_file_id: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: tuple[str, ...] = ()

    @classmethod
    def from_reply(cls, data: Mapping[str, Any]) -> BatchState:
        counts = data.get("request_counts") or {}
        errors = (data.get("errors") or {}).get("data") or ()
        return cls(
            id=str(data["id"]),
            status=str(data.get("status")),
            total=int(counts.get("total") or 0),
            completed=int(counts.get("completed") or 0),
            failed=int(counts.get("failed") or 0),
            input_file_id=data.get("input_file_id"),
            output_file_id=data.get("output_file_id"),
            error_file_id=data.get("error_file_id"),
            errors=tuple(f"line {e.get('line')}: {e.get('message')}" for e in errors),
        )

    @property
    def line(self) -> str:
        return f"{self.status}, {self.completed}/{self.total} done, {self.failed} failed"


@dataclass
class BatchReport:
    """What batch mode did, as request counters for the summary (`batch_*`)."""

    batches: int = 0  # created by this run
    collected: int = 0  # batches an earlier run sent, collected by this one
    requests: int = 0  # sent in this run's batches
    answered: int = 0  # cached from batches
    resubmitted: int = 0  # sent again after they expired or failed
    left: int = 0  # not answered after every round: sent live when their items run
    notes: list[str] = field(default_factory=list)

    @classmethod
    def total(cls, reports: Sequence[BatchReport]) -> BatchReport:
        total = cls()
        for report in reports:
            for name in ("batches", "collected", "requests", "answered", "resubmitted", "left"):
                setattr(total, name, getattr(total, name) + getattr(report, name))
            total.notes.extend(report.notes)
        return total

    def counts(self) -> dict[str, int]:
        return {
            f"batch_{name}": getattr(self, name)
            for name in ("batches", "collected", "requests", "answered", "resubmitted", "left")
        }


class BatchClient:
    """The files and batches calls of one OpenAI-compatible endpoint."""

    def __init__(self, endpoint: str, api_key: str | None, timeout_s: float = 600.0) -> None:
        self.endpoint = endpoint.rstrip("/")
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout_s = timeout_s
        self._http = HttpClient()

    async def _call(self, method: str, path: str, body: Any = None, json_body: Any = None) -> bytes:
        url = f"{self.endpoint}{path}"
        headers = dict(self._headers)
        if json_body is not None:
            body, headers["Content-Type"] = json.dumps(json_body).encode(), "application/json"
        for attempt in range(1, CALL_ATTEMPTS + 1):
            try:
                async with await self._http.send(
                    method, url, headers, body=body, timeout=self._timeout_s
                ) as response:
                    status, raw = response.status, await response.read()
                if status < 300:
                    return raw
                if status != 429 and status < 500:
                    raise BatchError(f"{method} {url}: HTTP {status}: {error_message(raw)}", status)
                failure = f"HTTP {status}"
            except (OSError, asyncio.TimeoutError) as exc:  # HttpError is an OSError
                failure = f"{type(exc).__name__}: {exc}"
            if attempt == CALL_ATTEMPTS:
                raise BatchError(f"{method} {url}: gave up after {attempt} attempts; last error: {failure}")
            await asyncio.sleep(min(8.0, 0.25 * 2**attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    async def upload(self, content: bytes, filename: str) -> str:
        def form() -> Any:  # fresh for each attempt: a form is read once
            import aiohttp

            data = aiohttp.FormData()
            data.add_field("purpose", "batch")
            data.add_field("file", content, filename=filename, content_type="application/jsonl")
            return data

        return str(json.loads(await self._call("POST", "/files", body=form))["id"])

    async def create(self, file_id: str, metadata: Mapping[str, str]) -> BatchState:
        request = {
            "input_file_id": file_id,
            "endpoint": ENDPOINT,
            "completion_window": "24h",
            "metadata": dict(metadata),
        }
        return BatchState.from_reply(json.loads(await self._call("POST", "/batches", json_body=request)))

    async def retrieve(self, batch_id: str) -> BatchState:
        return BatchState.from_reply(json.loads(await self._call("GET", f"/batches/{batch_id}")))

    async def cancel(self, batch_id: str) -> BatchState:
        return BatchState.from_reply(json.loads(await self._call("POST", f"/batches/{batch_id}/cancel")))

    async def content(self, file_id: str) -> bytes:
        return await self._call("GET", f"/files/{file_id}/content")

    async def rows(self, file_id: str) -> AsyncIterator[dict[str, Any]]:
        """A JSONL file's rows (those with a custom_id), read line by line: an output file
        of 50,000 long generations does not fit a reply's size limit, nor need it be in
        memory at once."""
        url = f"{self.endpoint}/files/{file_id}/content"
        async with await self._http.send(
            "GET", url, self._headers, timeout=self._timeout_s, max_body=MAX_FILE_BYTES
        ) as response:
            if response.status >= 300:
                raise BatchError(f"GET {url}: HTTP {response.status}: {error_message(await response.read())}")
            async for line in response.lines():
                with contextlib.suppress(ValueError):
                    row = json.loads(line)
                    if isinstance(row, dict) and isinstance(row.get("custom_id"), str):
                        yield row

    async def aclose(self) -> None:
        await self._http.close()


class BatchLedger:
    """`batches.json` in the cache folder: the batches sent and not yet collected, each
    with its endpoint and suite. Written (atomically) before a batch is polled."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / LEDGER_FILE

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """One process at a time sends and collects (xdist workers share the folder): the
        others wait, then find the generations in the cache."""
        import fcntl  # POSIX only: imported here so that the plugin imports without it

        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def entries(self, endpoint: str | None = None) -> list[dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except ValueError:
            return []  # a torn file: its batches are paid again, nothing else breaks
        batches = [b for b in data.get("batches", []) if isinstance(b, dict) and "id" in b]
        return [b for b in batches if endpoint is None or b.get("endpoint") == endpoint]

    def _write(self, batches: list[dict[str, Any]]) -> None:
        temporary = self.path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps({"batches": batches}, indent=1) + "\n", encoding="utf-8")
        os.replace(temporary, self.path)

    def add(self, entry: Mapping[str, Any]) -> None:
        self._write([*self.entries(), dict(entry)])

    def remove(self, batch_id: str) -> None:
        self._write([b for b in self.entries() if b["id"] != batch_id])


@dataclass
class Collected:
    """A finished batch's requests by custom_id: answered (and stored), to send again
    (never ran, 429, 5xx), refused for good (4xx: why)."""

    answered: list[str] = field(default_factory=list)
    again: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)


async def collect(client: BatchClient, state: BatchState, store: Store) -> Collected:
    """Map a finished batch's output and error files back to its requests by custom_id,
    storing each answer as it is read."""
    choices: dict[str, int | None] = {}  # custom_id -> the n its body asked for (None: one)
    if state.input_file_id:
        async for row in client.rows(state.input_file_id):
            n = (row.get("body") or {}).get("n")
            choices[row["custom_id"]] = None if n is None else int(n)
    result = Collected()
    for file_id in (state.output_file_id, state.error_file_id):
        if file_id:
            async for row in client.rows(file_id):
                _sort(row, choices.get(row["custom_id"]), result, store, state.id)
    seen = {*result.answered, *result.again, *result.refused}
    result.again.extend(custom_id for custom_id in choices if custom_id not in seen)  # in no file
    return result


def _sort(row: Mapping[str, Any], n: int | None, result: Collected, store: Store, batch_id: str) -> None:
    custom_id, response, error = row["custom_id"], row.get("response") or {}, row.get("error") or {}
    status = int(response.get("status_code") or 0)
    if status == 200:
        try:
            completions = parse_completions(response.get("body") or {}, 0.0, 1)
        except Retryable:
            result.again.append(custom_id)
            return
        if n is not None and len(completions) < n:  # a server that ignores n: the live run asks
            result.refused[custom_id] = f"{len(completions)} of n={n} choices"
            return
        store(custom_id, completions, n, batch_id)
        result.answered.append(custom_id)
    elif error.get("code") in NOT_RUN or status == 429 or status >= 500 or not status:
        result.again.append(custom_id)
    else:
        message = error_message(json.dumps(response.get("body") or error).encode())
        result.refused[custom_id] = f"HTTP {status}: {message}"


class BatchFill:
    """Fill the cache from batches: collect what an earlier run left in flight, send what
    is missing (one batch per suite, split at `max_requests`), poll every `poll_s`,
    store the answers and send the expired and failed ones again, `rounds` times at most."""

    def __init__(
        self,
        client: BatchClient,
        ledger: BatchLedger,
        store: Store,
        known: Callable[[str], bool],
        say: Say,
        poll_s: float = 30.0,
        max_requests: int = MAX_REQUESTS_PER_BATCH,
        rounds: int = RESUBMIT_ROUNDS,
    ) -> None:
        self.client, self.ledger, self.store, self.known, self.say = client, ledger, store, known, say
        self.poll_s, self.max_requests, self.rounds = poll_s, max_requests, rounds
        self.report = BatchReport()
        self._refused: dict[str, str] = {}

    async def run(self, requests: Mapping[str, Sequence[BatchRequest]]) -> BatchReport:
        earlier = self.ledger.entries(self.client.endpoint)
        if earlier:
            ids = ", ".join(b["id"] for b in earlier)
            self.say(f"collecting {len(earlier)} batch(es) an earlier run sent: {ids}")
            self.report.collected += len(earlier)
            await self._finish({b["id"]: b.get("suite", "?") for b in earlier})
        for round_ in range(self.rounds + 2):  # the first batch, then `rounds` resubmissions
            missing = {
                suite: [r for r in wanted if not self.known(r.custom_id) and r.custom_id not in self._refused]
                for suite, wanted in requests.items()
            }
            missing = {suite: wanted for suite, wanted in missing.items() if wanted}
            if not missing:
                break
            if round_ > self.rounds:
                self.report.left = sum(len(w) for w in missing.values())
                self.say(
                    f"{self.report.left} request(s) still unanswered after {self.rounds} "
                    "resubmissions: sent live"
                )
                break
            if round_ > 0:
                self.report.resubmitted += sum(len(w) for w in missing.values())
            sent = {}
            for suite, wanted in missing.items():
                for start in range(0, len(wanted), self.max_requests):
                    sent[await self._send(suite, wanted[start : start + self.max_requests])] = suite
            await self._finish(sent)
        if self._refused:
            first = next(iter(self._refused.values()))
            self.report.notes.append(
                f"{len(self._refused)} batch request(s) refused (first: {first}): "
                "sent live when their items run"
            )
        return self.report

    async def _send(self, suite: str, requests: Sequence[BatchRequest]) -> str:
        content = b"".join(r.line() for r in requests)
        file_id = await self.client.upload(content, f"agenteval-{suite}.jsonl")
        state = await self.client.create(file_id, {"suite": suite, "source": "pytest-agenteval"})
        entry = {"id": state.id, "endpoint": self.client.endpoint, "suite": suite, "requests": len(requests)}
        self.ledger.add({**entry, "created": time.time()})  # before polling: a rerun collects it
        self.report.batches += 1
        self.report.requests += len(requests)
        self.say(f"batch {state.id} ({suite}): {len(requests)} requests sent")
        return state.id

    async def _finish(self, batches: Mapping[str, str]) -> None:
        """Poll until each batch ends; store its answers, then forget it."""
        shown: dict[str, str] = {}
        waiting = dict(batches)
        while waiting:
            for batch_id, suite in list(waiting.items()):
                try:
                    state = await self.client.retrieve(batch_id)
                except BatchError as exc:
                    if exc.status != 404:
                        raise
                    self.say(f"batch {batch_id} ({suite}): unknown to {self.client.endpoint}: forgotten")
                    del waiting[batch_id]  # a server that lost it (restarted): its requests go again
                    self.ledger.remove(batch_id)
                    continue
                if shown.get(batch_id) != state.line:
                    shown[batch_id] = state.line
                    self.say(f"batch {batch_id} ({suite}): {state.line}")
                if state.status not in TERMINAL:
                    continue
                del waiting[batch_id]
                if state.status == "failed":
                    self.ledger.remove(batch_id)
                    raise BatchError(
                        f"batch {batch_id} failed validation: {'; '.join(state.errors) or 'no reason given'}"
                    )
                found = await collect(self.client, state, self.store)
                self.report.answered += len(found.answered)
                self._refused.update(found.refused)
                self.ledger.remove(batch_id)
            if waiting:
                await asyncio.sleep(self.poll_s)
