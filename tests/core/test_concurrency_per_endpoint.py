"""`--concurrency C` is per endpoint at all times: with three real servers and one of them
stopped mid-run, no server ever has more than C requests in flight (each counts its own),
however many endpoints are left in the rotation. Before, one pool of C x E slots was
shared, and the survivors took up to C x E between them exactly while failing over."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable
from typing import Any

import pytest

from pytest_agenteval.api.sampler import SamplingParams
from pytest_agenteval.models.backends.openai import OpenAISampler
from pytest_agenteval.models.http.health import EndpointHealth
from pytest_agenteval.models.http.slots import EndpointSlots
from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import read_results

C = 2
REQUESTS = 60
KILL_AFTER = 6  # the first server is stopped once it has received this many requests


def counting_script(after: int, reached: threading.Event, answer: str) -> Callable[[Any], str]:
    """A responder that sets `reached` on its `after`-th request."""
    seen = itertools.count(1)

    def reply(body: Any) -> str:
        if next(seen) == after:
            reached.set()
        return answer

    return reply


def stop_when(reached: threading.Event, server: OpenAITestServer) -> threading.Thread:
    """Stop `server` (its socket closes: connections are refused) once `reached` is set."""

    def run() -> None:
        reached.wait()
        server.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_the_sampler_keeps_c_per_endpoint_while_one_of_three_dies() -> None:
    reached = threading.Event()
    doomed = OpenAITestServer(
        ServerConfig(latency_ms=100, script=counting_script(KILL_AFTER, reached, "\\boxed{1}"))
    ).start()
    with OpenAITestServer(latency_ms=100) as second, OpenAITestServer(latency_ms=100) as third:
        servers = [doomed, second, third]
        killer = stop_when(reached, doomed)

        async def run() -> tuple[list[str], dict[str, Any]]:
            sampler = OpenAISampler([s.url for s in servers], "mock-model", concurrency=C)
            params = [SamplingParams(1.0, 1.0, 0, 64, seed) for seed in range(REQUESTS)]
            try:
                done = await asyncio.gather(
                    *(sampler.complete([{"role": "user", "content": "hi"}], p) for p in params)
                )
                return [c.finish_reason for c in done], sampler.stats()
            finally:
                await sampler.aclose()

        finishes, stats = asyncio.run(run())
        killer.join()
        served = [s.stats() for s in servers]
        oks = [s.stats()["outcomes"].get("ok", 0) for s in servers]
    assert finishes == ["stop"] * REQUESTS
    assert [s["max_in_flight"] for s in served] == [C, C, C]  # each server's own count
    assert sum(oks) == REQUESTS  # every request answered once, none lost
    assert KILL_AFTER <= oks[0] < REQUESTS  # the first really died mid-run
    assert stats["retry_connection"] >= 1  # and its refusals were retried on the others


def test_the_plugin_keeps_c_per_endpoint_under_xdist_while_one_of_three_dies(run_suite) -> None:
    answers = {"30 + 40": "\\boxed{70}"}
    reached = threading.Event()
    doomed = OpenAITestServer(
        ServerConfig(latency_ms=20, script=counting_script(KILL_AFTER, reached, "\\boxed{70}"))
    ).start()
    with (
        OpenAITestServer(latency_ms=20, answers=answers) as second,
        OpenAITestServer(latency_ms=20, answers=answers) as third,
    ):
        servers = [doomed, second, third]
        killer = stop_when(reached, doomed)
        result, out = run_suite(
            *(f"--endpoint={s.url}" for s in servers), f"--concurrency={C}", "--val-n=12", "-n", "2"
        )
        killer.join()
        served = [s.stats() for s in servers]
    problems, (summary,) = read_results(out)
    assert [len(p["generations"]) for p in problems] == [12, 12, 12, 12]
    assert summary["generations"] == 48 and summary["complete"] is True, result.stdout.str()
    # C is shared by the workers: C // 2 = 1 each, per endpoint; C at most on each server
    # (whether the two workers ever overlap on one server is up to their timing)
    assert max(s["max_in_flight"] for s in served) <= C
    assert sum(s["outcomes"].get("ok", 0) for s in served) == 48
    assert KILL_AFTER <= served[0]["outcomes"].get("ok", 0) < 48


def least_loaded(in_use: Any, full: frozenset[str]) -> tuple[str | None, float | None]:
    free = sorted((n, url) for url, n in in_use.items() if url not in full)
    return (free[0][1], 0.0) if free else (None, None)


def test_endpoint_slots_serve_waiters_by_priority_within_each_endpoints_cap() -> None:
    async def run() -> list[Any]:
        slots = EndpointSlots(["a", "b"], 1)
        first = [await slots.acquire((0, i), least_loaded) for i in range(2)]
        late = asyncio.create_task(slots.acquire((5, 0), least_loaded))
        urgent = asyncio.create_task(slots.acquire((1, 0), least_loaded))
        dropped = asyncio.create_task(slots.acquire((0, 9), least_loaded))
        await asyncio.sleep(0)
        dropped.cancel()  # a waiter that leaves takes nothing with it
        await asyncio.sleep(0)
        full = dict(slots.in_use)
        slots.release("b")
        got_urgent = await urgent
        slots.release("a")
        got_late = await late
        return [first, full, got_urgent, got_late, late.done(), dict(slots.in_use)]

    assert asyncio.run(run()) == [
        [("a", 0.0), ("b", 0.0)],
        {"a": 1, "b": 1},
        ("b", 0.0),  # the more urgent waiter first, on the endpoint that freed up
        ("a", 0.0),
        True,
        {"a": 1, "b": 1},
    ]


@pytest.mark.parametrize(
    ("avoid", "full", "expected"),
    [
        (None, frozenset(), ("a", 0.0)),
        ("a", frozenset(), ("b", 0.0)),
        ("a", frozenset({"b"}), (None, None)),  # waits for b rather than going back to a
        (None, frozenset({"a", "b"}), (None, None)),
        ("b", frozenset({"a"}), (None, None)),
    ],
)
def test_a_pick_skips_full_endpoints_and_the_one_that_just_failed(
    avoid: str | None, full: frozenset[str], expected: tuple[str | None, float | None]
) -> None:
    assert EndpointHealth(["a", "b"]).pick({"a": 0, "b": 0}, avoid, full) == expected


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ("--concurrency=1", "-n", "3"),
            "ERROR: --concurrency 1 is below the 3 xdist workers that share each endpoint: each worker "
            "sends at least one request at a time, so an endpoint would get 3; pass --concurrency 3 "
            "or more, or fewer workers (-n 1)",
        ),
        (("--concurrency=2", "-n", "2"), None),  # one slot each: C holds
    ],
    ids=["fewer-slots-than-workers", "one-slot-each"],
)
def test_fewer_slots_than_workers_is_a_start_up_error(
    run_suite, args: tuple[str, ...], line: str | None
) -> None:
    """Each worker keeps a request in flight, so C below W cannot hold per endpoint: before,
    every worker got max(1, C // W) and one endpoint had W requests at once."""
    with OpenAITestServer(latency_ms=50) as server:
        result, _ = run_suite(f"--endpoint={server.url}", "--val-n=2", *args)
        served = server.stats()
    if line is None:
        # it ran (the test server's default answer solves nothing: exit 1, not 4)
        assert (result.ret, served["outcomes"]["ok"]) == (1, 8) and served["max_in_flight"] <= 2
    else:
        assert (result.ret, [x for x in result.errlines if x.startswith("ERROR")]) == (4, [line])
        assert served["outcomes"].get("ok", 0) == 0  # refused before the first request


@pytest.mark.parametrize(
    ("tx", "per_host", "workers"),
    [
        (["popen"] * 3, False, 3),
        (["popen"] * 3, True, 3),
        (["socket=10.0.0.1:8888", "socket=10.0.0.1:8888", "socket=10.0.0.2:8888"], True, 2),
        (["socket=10.0.0.1:8888", "socket=10.0.0.1:8888", "socket=10.0.0.2:8888"], False, 3),
        (["ssh=me@h1//python=python3", "popen"], True, 1),
    ],
)
def test_workers_sharing_one_endpoint(tx: list[str], per_host: bool, workers: int) -> None:
    from pytest_agenteval.plugin.hosts import workers_per_endpoint

    assert workers_per_endpoint(tx, per_host) == workers


def test_a_waiter_that_fits_nowhere_does_not_hold_up_the_ones_behind_it() -> None:
    """The first in line is a retry that avoids "a" (it just failed there) while "b" is busy:
    the waiter behind it takes "a"'s free slot (before, it idled until "b" freed up)."""

    def avoiding(url: str) -> Any:
        def choose(in_use: Any, full: frozenset[str]) -> tuple[str | None, float | None]:
            return least_loaded(in_use, full | {url})

        return choose

    async def run() -> list[Any]:
        slots = EndpointSlots(["a", "b"], 1)
        assert await slots.acquire((0, 0), avoiding("a")) == ("b", 0.0)
        retry = asyncio.create_task(slots.acquire((0, 1), avoiding("a")))
        behind = asyncio.create_task(slots.acquire((0, 2), least_loaded))
        await asyncio.sleep(0)
        granted = [behind.done() and behind.result(), retry.done()]
        slots.release("b")
        await asyncio.sleep(0)
        return [*granted, await retry, dict(slots.in_use)]

    assert asyncio.run(run()) == [("a", 0.0), False, ("b", 0.0), {"a": 1, "b": 1}]
