"""The engine's whole-item admission: an item's samples start together, so a backend that
batches them (transformers) sees every one of them at once, whatever the timing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from pytest_agenteval.run.engine import Engine


def _gated(engine: Engine, started: list[str], name: str) -> tuple[Callable[[], Any], Callable[[], None]]:
    """A job that records its start and finishes when released, at once if it was released
    before it started (a release that found no job to wake would leave it waiting forever)."""
    gate: dict[str, asyncio.Future[None]] = {}
    released = False

    async def job() -> str:
        gate["f"] = asyncio.get_running_loop().create_future()
        started.append(name)
        if not released:
            await gate["f"]
        return name

    def open_gate() -> None:  # on the engine's loop, as `job` is: no race between the two
        nonlocal released
        released = True
        if "f" in gate and not gate["f"].done():
            gate["f"].set_result(None)

    def release() -> None:
        engine._loop.call_soon_threadsafe(open_gate)

    return job, release


def _settle(engine: Engine) -> None:
    """Let the engine's loop run everything already scheduled on it: a job `_admit` starts
    is a task whose first step (the `started` entry) comes before this coroutine's steps,
    so whatever would start by now has started (no sleep long enough for a busy machine)."""

    async def yielded() -> None:
        for _ in range(3):
            await asyncio.sleep(0)

    engine.run(yielded(), timeout=60)


def _wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 60  # a guard against a hang only: a loaded machine is slow
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.mark.parametrize("whole_items", [True, False])
def test_an_item_starts_only_when_all_its_samples_fit(whole_items: bool) -> None:
    engine = Engine(max_active=4, whole_items=whole_items)
    started: list[str] = []
    releases = {}
    futures = []
    for order, item in enumerate("ab"):
        entries = []
        for j in range(3):
            job, releases[f"{item}{j}"] = _gated(engine, started, f"{item}{j}")
            entries.append(((item, j), job, (float(order), j)))
        futures.extend(engine.submit_all(entries))
    try:
        _wait_for(lambda: len(started) >= (3 if whole_items else 4))
        _settle(engine)
        if not whole_items:  # plain admission fills the free slot with b's first sample
            assert started == ["a0", "a1", "a2", "b0"]
            return
        assert started == ["a0", "a1", "a2"]
        releases["a0"]()
        _wait_for(lambda: futures[0].done())
        _settle(engine)
        assert started == ["a0", "a1", "a2"]  # 2 free slots: not enough for b's 3 samples
        releases["a1"]()
        _wait_for(lambda: len(started) == 6)
        assert sorted(started[3:]) == ["b0", "b1", "b2"]
    finally:
        for release in releases.values():
            release()
        _wait_for(lambda: all(f.done() for f in futures))
        engine.close()
