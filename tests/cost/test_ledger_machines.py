"""A --budget-ledger shared by the shards of several machines (pods on NFS): each process's
reservations are kept under its machine, pid and start time, so a process drops only the
entries of its own machine whose process is gone (or whose pid was reused), and another
machine's only when it has not been seen for the lease; a request that finds no room for
too long fails with one line naming the ledger and what holds it. The second machine is
the one fault a test cannot cause: a forked process that names another hostname."""

from __future__ import annotations

import asyncio
import fcntl
import json
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from pytest_agenteval.models.cost import budget
from pytest_agenteval.models.cost.budget import BudgetLedger, LedgerError, Limits

LIMITS = Limits(max_total_tokens=1000)


def _pod_b(path: str, tokens: int, seen_ago: float, ready, leave) -> None:
    """A process of machine `pod-b` (forked) that reserves `tokens` and holds them until
    `leave` is set (None: it exits at once, as a crashed pod's process is gone here)."""
    budget._hostname = lambda: "pod-b"
    if seen_ago:
        now = getattr(budget, "_now", time.time)
        budget._now = lambda: now() - seen_ago
    BudgetLedger(Path(path), LIMITS).try_reserve(tokens, 0.0)
    ready.set()
    if leave is not None:
        leave.wait(30)


def _start_pod_b(path: Path, tokens: int, seen_ago: float = 0.0, stay: bool = False):
    context = multiprocessing.get_context("fork")
    ready, leave = context.Event(), (context.Event() if stay else None)
    process = context.Process(target=_pod_b, args=(str(path), tokens, seen_ago, ready, leave))
    process.start()
    assert ready.wait(10)
    if not stay:
        process.join(30)
    return process, leave


def _reserved(path: Path) -> dict:
    return json.loads(path.read_text())["reserved"]


def test_another_machines_reservation_in_flight_is_kept(tmp_path: Path, monkeypatch) -> None:
    """Its pid is no process of this machine: before, this machine dropped it as a crashed
    process's and spent the room it held (two pods past the budget)."""
    ledger = BudgetLedger.create(LIMITS, tmp_path)
    ledger.lease_s = 120
    _start_pod_b(ledger.path, 900)
    assert ledger.try_reserve(200, 0.0) is None  # waits for pod-b's 900 to settle
    assert [key.split("~")[0] for key in _reserved(ledger.path)] == ["pod-b"]
    later = budget._now() + 121  # pod-b not seen for longer than the lease: it crashed
    monkeypatch.setattr(budget, "_now", lambda: later)
    assert ledger.try_reserve(200, 0.0) is not None
    assert "pod-b" not in json.dumps(_reserved(ledger.path))


def test_a_crashed_machines_reservation_expires_though_its_pid_lives_here(tmp_path: Path) -> None:
    """pid 1 lives on every machine: before, a crashed pod's reservation under a pid alive
    here was never dropped, and every request waited on it for ever."""
    ledger = BudgetLedger.create(LIMITS, tmp_path)
    ledger.lease_s = 120
    process, leave = _start_pod_b(ledger.path, 900, seen_ago=600, stay=True)  # its pid lives here
    try:
        assert ledger.try_reserve(200, 0.0) is not None
    finally:
        leave.set()
        process.join(30)


def test_this_machines_entry_under_a_reused_pid_is_dropped(tmp_path: Path) -> None:
    ledger = BudgetLedger.create(LIMITS, tmp_path)
    data = json.loads(ledger.path.read_text())
    reused = f"{budget._machine()}/{os.getppid()}/1"  # a live pid that started at another time
    data["reserved"][reused] = {"tokens": 900, "usd": 0.0, "seen": budget._now()}
    ledger.path.write_text(json.dumps(data))
    assert ledger.try_reserve(200, 0.0) is not None
    assert reused not in _reserved(ledger.path)


def _waited_out(tmp_path: Path, seen_ago: float = 0.0) -> tuple[BudgetLedger, int, str]:
    """A request that finds no room while pod-b (alive, last seen `seen_ago` s ago) holds
    900 of the 1000 tokens: the ledger, pod-b's pid and the one line reserve() gives up with."""
    ledger = BudgetLedger.create(LIMITS, tmp_path)
    ledger.lease_s = 120
    ledger.wait_s = 0.2
    process, leave = _start_pod_b(ledger.path, 900, seen_ago=seen_ago, stay=True)
    try:
        with pytest.raises(LedgerError) as caught:
            asyncio.run(asyncio.wait_for(ledger.reserve(200, 0.0), 10))
    finally:
        leave.set()
        process.join(30)
    return ledger, process.pid, str(caught.value)


def test_a_request_that_finds_no_room_for_too_long_names_the_ledger_and_its_holder(tmp_path: Path) -> None:
    """Before: reserve() waited for ever."""
    ledger, pid, message = _waited_out(tmp_path)  # pod-b alive, seen: holds its room
    assert "\n" not in message
    assert message.startswith(f"not sent: waited 0.2 s for room in the budget ledger {ledger.path}, ")
    assert f"held by pod-b pid {pid} (900 tokens, $0.000000, seen 0 s ago)" in message
    # every holder alive: the room is taken by requests in flight, nothing crashed
    alive = "all alive (their requests are in flight): lower --max-tokens or raise the budget"
    assert message.endswith(alive)


def test_a_holder_not_seen_for_half_the_lease_is_named_as_maybe_crashed(tmp_path: Path) -> None:
    _, _, message = _waited_out(tmp_path, seen_ago=70)
    assert "seen 70 s ago" in message
    assert message.endswith("(--request-timeout + 60 s): check those processes")


def test_the_heartbeat_outlives_a_storage_error(tmp_path: Path, monkeypatch) -> None:
    """Before: the first error (a stale NFS handle, say) ended the thread for good, and a
    request running past the lease had its live reservation dropped by the other machines."""
    ledger = BudgetLedger.create(LIMITS, tmp_path)
    ledger.lease_s = 0.2  # a beat every 0.05 s
    assert ledger.try_reserve(100, 0.0) is not None
    (before,) = _reserved(ledger.path).values()
    original, failed = ledger._update, []

    def flaky(change, write=True):
        if not failed:
            failed.append(time.time())
            raise OSError("Stale file handle")
        return original(change, write)

    monkeypatch.setattr(ledger, "_update", flaky)
    time.sleep(0.5)
    ledger.close()
    (after,) = _reserved(ledger.path).values()
    assert failed and after["seen"] > failed[0] > before["seen"]


def test_a_shard_starting_while_another_writes_reads_the_ledger_under_its_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other shard's write is half done until its lock is released: before, a shard
    starting then read the file without the lock and was refused ("not a budget ledger")."""
    path = tmp_path / "budget.json"
    whole = json.dumps({**budget._empty(), "spent_usd": 1.5})
    path.write_text(whole[:20])  # the other shard is writing, under its lock
    flock = fcntl.flock

    def locked(handle, operation):  # the lock is ours once the other shard's write is done
        if operation == fcntl.LOCK_EX and path.read_text() != whole:
            path.write_text(whole)
        return flock(handle, operation)

    monkeypatch.setattr(fcntl, "flock", locked)
    ledger = BudgetLedger.shared(path, Limits(max_cost_usd=5.0), "shard-1")
    assert ledger.state().spent_usd == 1.5


def test_a_ledger_left_half_written_is_one_line_naming_the_file(tmp_path: Path) -> None:
    """A process killed as it wrote: before, every later request raised JSONDecodeError."""
    ledger = BudgetLedger.create(LIMITS, tmp_path)
    ledger.path.write_text('{"spent_usd": 0.5, "spent_tok')
    with pytest.raises(LedgerError) as caught:
        ledger.try_reserve(10, 0.0)
    assert str(caught.value) == (
        f"the budget ledger {ledger.path} is not JSON (a process killed while writing it?): remove it "
        "to start over, and lower the budget by what it had spent"
    )


def test_each_run_keeps_its_own_count_of_how_prompts_were_reserved(tmp_path: Path) -> None:
    """Two shards on one ledger: each summary's counts are its own (before: the ledger's,
    so the merge counted every reservation once per shard)."""
    first = BudgetLedger.create(Limits(max_total_tokens=10_000), tmp_path)
    second = BudgetLedger(first.path, first.limits, "shard-b")
    first.run = "shard-a"
    for _ in range(3):
        first.settle(first.try_reserve(10, 0.0, "UTF-8 bytes + framing"), 10, 0.0)
    second.settle(second.try_reserve(10, 0.0, "UTF-8 bytes + framing"), 10, 0.0)
    assert first.run_state().reservations == {"UTF-8 bytes + framing": 3}
    assert second.run_state().reservations == {"UTF-8 bytes + framing": 1}
    assert first.state().reservations == {"UTF-8 bytes + framing": 4}
