"""The budget ledger the run's processes share: a request is refused when the spending
and its own worst case pass the budget, waits while only other requests' reservations do,
and real processes racing for the last of a budget never overspend it."""

from __future__ import annotations

import asyncio
import multiprocessing
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_agenteval.models.cost.budget import BudgetExceeded, BudgetLedger, Limits
from pytest_agenteval.models.cost.prompt_bound import byte_bound


def test_a_request_the_budget_cannot_take_is_refused_with_one_line(tmp_path: Path) -> None:
    ledger = BudgetLedger.create(Limits(max_cost_usd=0.01), tmp_path)
    key = ledger.try_reserve(100, 0.006)
    ledger.settle(key, 90, 0.005)
    with pytest.raises(BudgetExceeded) as caught:
        ledger.try_reserve(100, 0.006)
    assert str(caught.value) == "not sent: budget $0.010000 reached ($0.005000 spent)"
    state = ledger.state()
    assert (state.spent_usd, state.spent_tokens, state.requests, state.refused) == (0.005, 90, 1, 1)
    assert ledger.try_reserve(100, 0.005) is not None  # exactly the rest still fits


@pytest.mark.parametrize(
    ("limits", "spent", "worst", "line"),
    [
        # nothing spent: not 'budget $0.000400 reached ($0.000000 spent)' (before) but why
        (
            Limits(max_cost_usd=0.0004), 0.0, (40000, 0.0656),
            "not sent: its worst case $0.065600 (max_tokens 32768) exceeds the $0.000400 left of --max-cost "
            "$0.000400: lower --max-tokens or raise --max-cost",
        ),
        # most of the budget left: the request's worst case is the matter
        (
            Limits(max_cost_usd=0.01), (100, 0.002), (5000, 0.009),
            "not sent: its worst case $0.009000 (max_tokens 32768) exceeds the $0.008000 left of --max-cost "
            "$0.010000: lower --max-tokens or raise --max-cost",
        ),
        # half or more spent, and the request would fit a whole budget: the budget is reached
        (
            Limits(max_cost_usd=0.01), (100, 0.006), (5000, 0.005),
            "not sent: budget $0.010000 reached ($0.006000 spent)",
        ),
        (
            Limits(max_total_tokens=1000), 0.0, (40000, 0.0),
            "not sent: its worst case 40000 tokens (max_tokens 32768) exceeds the 1000 tokens left of "
            "--max-total-tokens 1000: lower --max-tokens or raise --max-total-tokens",
        ),
        (
            Limits(max_total_tokens=1000), (700, 0.0), (400, 0.0),
            "not sent: budget 1000 tokens reached (700 spent)",
        ),
    ],
)  # fmt: skip
def test_the_refusal_says_why_the_request_does_not_fit(
    tmp_path: Path, limits: Limits, spent: tuple | float, worst: tuple, line: str
) -> None:
    ledger = BudgetLedger.create(limits, tmp_path)
    if spent:
        ledger.settle(ledger.try_reserve(*spent), *spent)
    with pytest.raises(BudgetExceeded) as caught:
        ledger.try_reserve(*worst, "UTF-8 bytes + framing", "max_tokens 32768")
    assert str(caught.value) == line


def test_the_token_budget_needs_no_price(tmp_path: Path) -> None:
    ledger = BudgetLedger.create(Limits(max_total_tokens=1000), tmp_path)
    ledger.settle(ledger.try_reserve(600, 0.0), 600, 0.0)
    with pytest.raises(BudgetExceeded, match=r"^not sent: budget 1000 tokens reached \(600 spent\)$"):
        ledger.try_reserve(401, 0.0)
    assert ledger.try_reserve(400, 0.0) is not None


def test_a_request_waits_while_only_others_reservations_stand_in_the_way(tmp_path: Path) -> None:
    ledger = BudgetLedger.create(Limits(max_total_tokens=1000), tmp_path)
    first = ledger.try_reserve(800, 0.0)  # in flight, its worst case
    assert ledger.try_reserve(800, 0.0) is None  # would fit alone: wait, not refused

    async def second_after_settle() -> str:
        waiting = asyncio.ensure_future(ledger.reserve(800, 0.0))
        await asyncio.sleep(0.2)
        assert not waiting.done()
        ledger.settle(first, 150, 0.0)  # the reply used far less than its worst case
        return await asyncio.wait_for(waiting, 5)

    assert asyncio.run(second_after_settle())
    assert ledger.state().refused == 0


def test_a_released_reservation_costs_nothing(tmp_path: Path) -> None:
    ledger = BudgetLedger.create(Limits(max_total_tokens=100), tmp_path)
    ledger.release(ledger.try_reserve(100, 0.0))  # the request failed: nothing billed
    assert ledger.try_reserve(100, 0.0) is not None
    assert ledger.state().spent_tokens == 0


def test_a_dead_processs_reservations_are_dropped(tmp_path: Path) -> None:
    ledger = BudgetLedger.create(Limits(max_total_tokens=100), tmp_path)
    code = (
        "import sys; from pathlib import Path;"
        "from pytest_agenteval.models.cost.budget import BudgetLedger, Limits;"
        "BudgetLedger(Path(sys.argv[1]), Limits(max_total_tokens=100)).try_reserve(100, 0.0)"
    )
    subprocess.run([sys.executable, "-c", code, str(ledger.path)], check=True)  # reserves, then exits
    assert ledger.try_reserve(100, 0.0) is not None  # not left waiting for it forever


def _spend(path: str, attempts: int, queue: multiprocessing.Queue) -> None:
    ledger = BudgetLedger(Path(path), Limits(max_total_tokens=1000))
    settled = 0
    for _ in range(attempts):
        try:
            key = asyncio.run(ledger.reserve(10, 0.0))
        except BudgetExceeded:
            continue
        ledger.settle(key, 10, 0.0)
        settled += 1
    queue.put(settled)


def test_processes_racing_for_the_last_of_a_budget_never_overspend_it(tmp_path: Path) -> None:
    ledger = BudgetLedger.create(Limits(max_total_tokens=1000), tmp_path)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    workers = [context.Process(target=_spend, args=(str(ledger.path), 60, queue)) for _ in range(4)]
    for worker in workers:
        worker.start()
    settled = [queue.get(timeout=60) for _ in workers]
    for worker in workers:
        worker.join(timeout=10)
    state = ledger.state()
    assert sum(settled) == 100 and state.spent_tokens == 1000  # 240 tried, exactly 100 fit
    assert (state.requests, state.refused) == (100, 140)


# framing: 32 a request, 8 a message, 256 where tools are declared (prompt_bound.py)
@pytest.mark.parametrize(
    ("messages", "tools", "tokens"),
    [
        ([{"role": "user", "content": "x" * 40}], None, 80),  # 40 bytes + 32 + 8
        ([{"role": "system", "content": ""}, {"role": "user", "content": "abcde"}], None, 53),
        ([{"role": "user", "content": "abcd"}], [{"type": "function"}], 322),  # + 22 bytes of JSON + 256
        ([{"role": "user", "content": "数学"}], None, 46),  # 6 bytes: 3 each
        ([{"role": "user", "content": "é😀"}], None, 46),  # 2 + 4 bytes
        ([{"role": "assistant", "content": "", "tool_calls": [{"id": "c"}]}], None, 53),  # + 13 bytes
    ],
)
def test_the_prompt_bound_before_sending(messages: list, tools: list | None, tokens: int) -> None:
    assert byte_bound(messages, tools) == tokens
