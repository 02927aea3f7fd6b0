"""The engine's load, which the prefetch window reads: jobs not finished (queued or
running) and jobs held (those plus finished ones not released yet), through every way
a job ends: it finishes, fails, is released before it starts, or is withdrawn."""

from __future__ import annotations

from pytest_agenteval.run.engine import Engine
from tests.core.test_engine_whole_items import _gated, _wait_for


def test_load_counts_jobs_through_finish_failure_release_and_withdrawal() -> None:
    engine = Engine(max_active=2)
    started: list[str] = []
    try:
        first, release_first = _gated(engine, started, "a0")
        second, release_second = _gated(engine, started, "a1")

        async def fails() -> None:
            raise RuntimeError("boom")

        async def never() -> None:  # queued behind the two running ones
            raise AssertionError("released before it started")

        futures = engine.submit_all([(("a", 0), first, (0.0, 0)), (("a", 1), second, (0.0, 1))])
        engine.submit_all([(("b", 0), never, (1.0, 0)), (("c", 0), never, (2.0, 0))])
        _wait_for(lambda: len(started) == 2)
        assert engine.load() == (4, 4)
        engine.release([("b", 0)])  # queued: cancelled, no longer held
        assert engine.load() == (3, 3)
        assert engine.withdraw([("c",)]) == [True]
        assert engine.load() == (2, 2)
        release_first()
        _wait_for(futures[0].done)
        _wait_for(lambda: engine.load() == (1, 2))  # finished, still held
        engine.submit(("d", 0), fails, (3.0, 0))
        _wait_for(lambda: engine.load() == (1, 3))  # a failure finishes a job too
        release_second()
        _wait_for(lambda: engine.load() == (0, 3))
        engine.release([("a", 0), ("a", 1), ("d", 0)])
        assert engine.load() == (0, 0)
    finally:
        engine.close()
