"""The test server's Batch API and the client that fills the cache from it (models/cost/batch.py),
over real sockets: a batch's life, replies equal to live ones, expiry, failures by status,
the per-file limit, splitting at the request limit, auth, and the ledger."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.models.cost.batch import (
    BatchClient,
    BatchError,
    BatchFill,
    BatchLedger,
    BatchRequest,
    collect,
)
from pytest_agenteval.testing import BatchConfig, OpenAITestServer


def body(question: str, seed: int = 1) -> dict[str, Any]:
    return {"model": "mock-model", "messages": [{"role": "user", "content": question}], "seed": seed}


def requests(count: int) -> list[BatchRequest]:
    return [BatchRequest(f"{i:064x}", body(f"question {i}")) for i in range(count)]


class Filled:
    """What a BatchFill stored, and the lines it said."""

    def __init__(self) -> None:
        self.stored: dict[str, tuple[list[Any], int | None]] = {}
        self.batch_ids: dict[str, str] = {}  # key -> the batch that answered it
        self.said: list[str] = []

    def store(self, key: str, completions: list[Any], n: int | None, batch_id: str) -> None:
        self.stored[key] = (completions, n)
        self.batch_ids[key] = batch_id


def fill_with(server: OpenAITestServer, folder: Path, **kwargs: Any) -> tuple[BatchFill, Filled]:
    filled = Filled()
    client = BatchClient(server.url, None)
    fill = BatchFill(
        client,
        BatchLedger(folder),
        filled.store,
        filled.stored.__contains__,
        filled.said.append,
        0.02,
        **kwargs,
    )
    return fill, filled


async def _fill(fill: BatchFill, wanted: dict[str, list[BatchRequest]]) -> Any:
    try:
        return await fill.run(wanted)
    finally:
        await fill.client.aclose()


def test_a_batch_goes_through_validating_in_progress_finalizing_to_completed(tmp_path: Path) -> None:
    config = BatchConfig(validating_s=0.15, request_ms=40, finalizing_s=0.15)
    with OpenAITestServer(batch=config) as server:
        fill, filled = fill_with(server, tmp_path)
        report = asyncio.run(_fill(fill, {"suite": requests(4)}))
    states = [line.split(": ", 1)[1] for line in filled.said if "batch-" in line]
    assert states[0] == "4 requests sent"
    assert states[1] == "validating, 0/0 done, 0 failed"
    assert states[-2:] == ["finalizing, 4/4 done, 0 failed", "completed, 4/4 done, 0 failed"]
    progress = [s for s in states if s.startswith("in_progress")]
    assert progress[0] == "in_progress, 0/4 done, 0 failed" and len(progress) >= 3
    assert (report.batches, report.requests, report.answered, report.left) == (1, 4, 4, 0)


def test_a_batch_reply_is_the_reply_the_live_endpoint_gives(tmp_path: Path) -> None:
    question = body("What is 2 + 2?", seed=7) | {"n": 2, "max_tokens": 5}
    with OpenAITestServer(answer="seed {seed}, choice {index}: \\boxed{{4}}") as server:
        request = urllib.request.Request(
            f"{server.url}/chat/completions",
            json.dumps(question).encode(),
            {"Content-Type": "application/json"},
        )
        live = json.loads(urllib.request.urlopen(request).read())
        fill, filled = fill_with(server, tmp_path)
        asyncio.run(_fill(fill, {"suite": [BatchRequest("k" * 64, question)]}))
    completions, n = filled.stored["k" * 64]
    assert n == 2
    assert [(c.text, c.finish_reason) for c in completions] == [
        (choice["message"]["content"], choice["finish_reason"]) for choice in live["choices"]
    ]
    assert completions[0].text == "seed 7, choice 0: \\b"  # max_tokens 5: the first 20 characters
    assert completions[0].request_usage == {
        "prompt_tokens": live["usage"]["prompt_tokens"],
        "completion_tokens": live["usage"]["completion_tokens"],
    }


@pytest.mark.parametrize(
    ("config", "again", "refused"),
    [
        (BatchConfig(fail_first_k=1, fail_status=500), 3, 0),  # a server error: sent again
        (BatchConfig(fail_first_k=1, fail_status=429), 3, 0),  # rate limited: sent again
        (BatchConfig(fail_first_k=1, fail_status=400), 0, 3),  # the request itself: not again
        (BatchConfig(expire_after=1), 2, 0),  # never ran: sent again
        (BatchConfig(), 0, 0),
    ],
)
def test_a_finished_batch_maps_each_line_back_by_custom_id(
    config: BatchConfig, again: int, refused: int
) -> None:
    async def one_batch(server: OpenAITestServer) -> Any:
        client = BatchClient(server.url, None)
        try:
            content = b"".join(r.line() for r in requests(3))
            state = await client.create(await client.upload(content, "x.jsonl"), {})
            while state.status not in ("completed", "expired"):
                await asyncio.sleep(0.01)
                state = await client.retrieve(state.id)
            return await collect(client, state, stored.store)
        finally:
            await client.aclose()

    stored = Filled()
    with OpenAITestServer(batch=config) as server:
        found = asyncio.run(one_batch(server))
    assert sorted(stored.stored) == sorted(found.answered)  # each answer stored as it was read
    assert (len(found.answered), len(found.again), len(found.refused)) == (
        3 - again - refused,
        again,
        refused,
    )
    assert set(found.answered) | set(found.again) | set(found.refused) == {r.custom_id for r in requests(3)}
    if refused:
        assert next(iter(found.refused.values())) == (
            "HTTP 400: The server had an error while processing your request (injected fault)."
        )


def test_requests_are_split_into_batches_of_the_request_limit(tmp_path: Path) -> None:
    with OpenAITestServer(batch=BatchConfig()) as server:
        fill, filled = fill_with(server, tmp_path, max_requests=2)
        report = asyncio.run(_fill(fill, {"aime25": requests(5), "bfcl": requests(1)}))
        stats = server.stats()["batch"]
    assert (report.batches, stats["batches_created"], stats["requests_answered"]) == (4, 4, 6)
    assert len(filled.stored) == 5  # bfcl's one request is aime25's first: one key
    assert BatchLedger(tmp_path).entries() == []


def test_a_file_over_the_servers_request_limit_fails_validation_in_one_line(tmp_path: Path) -> None:
    with OpenAITestServer(batch=BatchConfig(max_requests_per_file=2)) as server:
        fill, _ = fill_with(server, tmp_path)
        with pytest.raises(BatchError) as raised:
            asyncio.run(_fill(fill, {"suite": requests(3)}))
    assert str(raised.value) == (
        "batch batch-mock000002 failed validation: line None: "
        "The batch input file has 3 requests, over the limit of 2."
    )
    assert BatchLedger(tmp_path).entries() == []  # nothing to collect later


def test_the_batch_endpoints_ask_for_the_api_key(tmp_path: Path) -> None:
    with OpenAITestServer(api_key="sk-test-key") as server:
        fill, _ = fill_with(server, tmp_path)
        with pytest.raises(BatchError) as raised:
            asyncio.run(_fill(fill, {"suite": requests(1)}))
        assert str(raised.value) == f"POST {server.url}/files: HTTP 401: Incorrect API key provided."
        keyed = BatchFill(BatchClient(server.url, "sk-test-key"), BatchLedger(tmp_path), *_sinks())
        assert asyncio.run(_fill(keyed, {"suite": requests(1)})).answered == 1


def _sinks() -> tuple[Any, ...]:
    filled = Filled()
    return filled.store, filled.stored.__contains__, filled.said.append, 0.02


def test_a_cancelled_batch_lists_its_unrun_requests_as_batch_cancelled() -> None:
    async def cancelled(server: OpenAITestServer) -> Any:
        client = BatchClient(server.url, None)
        try:
            content = b"".join(r.line() for r in requests(3))
            state = await client.create(await client.upload(content, "x.jsonl"), {})
            assert (await client.cancel(state.id)).status == "cancelling"
            while state.status != "cancelled":
                await asyncio.sleep(0.01)
                state = await client.retrieve(state.id)
            return state, await client.content(state.error_file_id or "")
        finally:
            await client.aclose()

    with OpenAITestServer(batch=BatchConfig(validating_s=0.1)) as server:
        state, errors = asyncio.run(cancelled(server))
    assert (state.status, state.completed, state.output_file_id) == ("cancelled", 0, None)
    codes = [json.loads(line)["error"]["code"] for line in errors.splitlines()]
    assert codes == ["batch_cancelled"] * 3


def test_the_ledger_lists_batches_until_removed_and_survives_a_torn_file(tmp_path: Path) -> None:
    ledger = BatchLedger(tmp_path)
    ledger.add({"id": "batch_1", "endpoint": "http://a/v1", "suite": "aime25"})
    ledger.add({"id": "batch_2", "endpoint": "http://b/v1", "suite": "bfcl"})
    assert [b["id"] for b in ledger.entries("http://a/v1")] == ["batch_1"]
    ledger.remove("batch_1")
    assert [b["id"] for b in ledger.entries()] == ["batch_2"]
    (tmp_path / "batches.json").write_text('{"batches": [{"id": "batch_2"', encoding="utf-8")
    assert ledger.entries() == []


def test_a_listed_batch_the_endpoint_no_longer_knows_is_forgotten_and_sent_again(tmp_path: Path) -> None:
    with OpenAITestServer() as server:
        ledger = BatchLedger(tmp_path)
        ledger.add({"id": "batch-gone", "endpoint": server.url, "suite": "suite"})
        fill, filled = fill_with(server, tmp_path)
        report = asyncio.run(_fill(fill, {"suite": requests(2)}))
        stats = server.stats()["batch"]
    assert f"batch batch-gone (suite): unknown to {server.url}: forgotten" in filled.said
    assert (report.collected, report.batches, report.answered) == (1, 1, 2)
    assert stats["batches_created"] == 1
    assert ledger.entries() == []


def test_the_server_process_takes_the_batch_flags(tmp_path: Path) -> None:
    from pytest_agenteval.testing import start_server_process, stop_server_process

    proc, url = start_server_process("--batch-expire-after", "1", "--batch-request-ms", "5")
    try:
        fill = BatchFill(BatchClient(url, None), BatchLedger(tmp_path), *_sinks())
        report = asyncio.run(_fill(fill, {"suite": requests(3)}))
    finally:
        stats = stop_server_process(proc)
    assert (report.batches, report.resubmitted, report.answered) == (2, 2, 3)
    assert stats["batch"]["statuses"] == {"expired": 1, "completed": 1}
