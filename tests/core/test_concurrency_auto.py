"""`--concurrency auto`: each endpoint's limit found by AIMD (models/http/aimd.py; its
rules, driven by scripted replies, are in test_aimd_rules.py) and kept in EndpointSlots:
a lower limit cancels nothing in flight, a higher one lets the waiters out at once.
Against the test server's rate limit (`max_concurrent`), a run completes, finds the limit
and sends nothing twice; its summary's history shows how. The end-to-end tests assert
only what holds on any machine: no count that depends on timing."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from pytest_agenteval.api.sampler import SamplingParams
from pytest_agenteval.config.table import OPTIONS
from pytest_agenteval.models.backends.openai import OpenAISampler
from pytest_agenteval.models.http.aimd import auto_start, says_overloaded
from pytest_agenteval.models.http.slots import EndpointSlots
from pytest_agenteval.output.concurrency import concurrency_lines, concurrency_summary
from pytest_agenteval.testing import OpenAITestServer
from tests.conftest import read_results

K = 6  # the test server's rate limit: requests at once


@pytest.mark.parametrize(
    ("concurrency", "share", "ceiling", "start"),
    [
        ("auto", 64, 64, 4),  # one process: 4
        ("auto", 32, 64, 2),  # -n 2: each worker half of 4
        ("auto", 22, 64, 1),  # -n 3: at least 1 each
        ("auto", 2, 2, 2),  # never above the ceiling
        (32, 32, 64, None),  # a fixed --concurrency: nothing adapts
    ],
)
def test_the_starting_limit_is_4_for_the_run_split_like_the_ceiling(
    concurrency: int | str, share: int, ceiling: int, start: int | None
) -> None:
    assert auto_start(concurrency, share, ceiling) == start


@pytest.mark.parametrize(
    ("status", "body", "overloaded"),
    [
        (500, {"error": {"message": "The server is overloaded, please try again later."}}, True),
        (400, {"error": {"message": "The request queue is full."}}, True),
        (400, {"error": {"message": "Too many requests, slow down"}}, True),
        (500, {"error": {"message": "Rate limit exceeded for this model"}}, True),
        (500, {"error": {"message": "The server had an error while processing your request."}}, False),
        (400, {"error": {"message": "This model's maximum context length is 4096 tokens."}}, False),
        (503, {"error": {"message": "The server is overloaded."}}, False),  # 503: said by its status
        (200, {"choices": [{"message": {"content": "overloaded"}}]}, False),
    ],
)
def test_an_overload_said_in_a_400_or_500_message(
    status: int, body: dict[str, Any], overloaded: bool
) -> None:
    assert says_overloaded(status, json.dumps(body).encode()) is overloaded


@pytest.mark.parametrize(
    ("raw", "value"),
    [("auto", "auto"), ("AUTO", "auto"), ("12", 12), (" 1 ", 1)],
)
def test_concurrency_takes_a_count_or_auto(raw: str, value: int | str) -> None:
    (option,) = [o for o in OPTIONS if o.dest == "concurrency"]
    assert option.parse(raw, "--concurrency") == value


@pytest.mark.parametrize("raw", ["0", "-3", "lots", "4.5", ""])
def test_a_bad_concurrency_is_one_line(raw: str) -> None:
    (option,) = [o for o in OPTIONS if o.dest == "concurrency"]
    with pytest.raises(pytest.UsageError) as error:
        option.parse(raw, "--concurrency")
    assert str(error.value) == (
        f"--concurrency: {raw!r} is not a number >= 1 or auto (e.g. --concurrency 32, or "
        "--concurrency auto to find each endpoint's limit)"
    )


def least_loaded(in_use: Any, full: frozenset[str]) -> tuple[str | None, float | None]:
    free = sorted((n, url) for url, n in in_use.items() if url not in full)
    return (free[0][1], 0.0) if free else (None, None)


def test_a_lower_limit_cancels_nothing_and_waits_for_the_requests_over_it() -> None:
    """4 in flight, a 429 halves the limit to 2: the other 3 finish, the waiter goes out
    only once fewer than 2 are in flight, and the successes of the requests sent at 4 do
    not grow it (they said nothing about 2)."""

    async def run() -> list[Any]:
        slots = EndpointSlots(["a"], 8, start=4)
        sent = time.monotonic()
        for i in range(4):
            assert await slots.acquire((0, i), least_loaded) == ("a", 0.0)
        waiter = asyncio.create_task(slots.acquire((1, 0), least_loaded))
        await asyncio.sleep(0)
        seen = []
        for outcome in ("429", "500", "ok", "ok"):  # a 500 without an overload message: no change
            slots.release("a", outcome, sent)
            await asyncio.sleep(0)
            seen.append((outcome, slots.limit("a"), slots.in_use["a"], waiter.done()))
        return [*seen, await waiter]

    assert asyncio.run(run()) == [
        ("429", 2, 3, False),  # 3 still in flight, over the new limit: none cancelled
        ("500", 2, 2, False),  # at the limit: the waiter still waits
        ("ok", 2, 2, True),  # under it: the waiter goes out
        ("ok", 2, 1, True),  # sent at 4: no growth
        ("a", 0.0),
    ]


def test_a_higher_limit_lets_the_waiters_out_at_once() -> None:
    async def run() -> list[Any]:
        slots = EndpointSlots(["a"], 8, start=2)
        await slots.acquire((0, 0), least_loaded)
        await slots.acquire((0, 1), least_loaded)
        waiters = [asyncio.create_task(slots.acquire((1, i), least_loaded)) for i in range(3)]
        await asyncio.sleep(0)
        slots.release("a", "ok", 0.0)  # 2 at 2: the first of the window; a waiter takes its slot
        await asyncio.sleep(0)
        slots.release("a", "ok", 0.0)  # the second: slow start doubles to 4, the others go out
        await asyncio.sleep(0)
        return [
            slots.limit("a"),
            slots.in_use["a"],
            [w.done() for w in waiters],
            slots.report()[0]["changes"][0][1:],
        ]

    assert asyncio.run(run()) == [4, 3, [True, True, True], [2, 4, "slow_start"]]


def test_fixed_slots_ignore_outcomes() -> None:
    async def run() -> tuple[int, list[Any]]:
        slots = EndpointSlots(["a"], 3)
        await slots.acquire((0, 0), least_loaded)
        slots.release("a", "429", 0.0)
        return slots.limit("a"), slots.report()

    assert asyncio.run(run()) == (3, [])


def test_the_summary_adds_up_workers_and_keeps_the_history_in_time_order() -> None:
    url = "http://h:8000/v1"
    reports = [
        {"endpoint": url, "worker": "gw0", "start": 2, "final": 3, "max": 32,
         "changes": [[100.5, 2, 4, "slow_start"], [101.0, 4, 2, "429"], [101.5, 2, 3, "successes"]]},
        {"endpoint": url, "worker": "gw1", "start": 2, "final": 3, "max": 32,
         "changes": [[100.75, 2, 4, "slow_start"], [101.25, 4, 8, "slow_start"], [101.75, 8, 4, "503"],
                     [102.0, 4, 3, "503"]]},
    ]  # fmt: skip
    summary = concurrency_summary(reports, started=100.0)
    assert summary == {
        "endpoints": {
            url: {"start": 4, "final": 6, "peak": 12, "max": 64, "doublings": 3, "increases": 1,
                  "cuts": {"429": 1, "503": 2}, "workers": 2,
                  "per_worker": {"gw0": {"start": 2, "final": 3, "peak": 4},
                                 "gw1": {"start": 2, "final": 3, "peak": 8}}},
        },
        "history": [
            {"at_s": 0.5, "endpoint": url, "worker": "gw0", "old": 2, "new": 4, "why": "slow_start"},
            {"at_s": 0.75, "endpoint": url, "worker": "gw1", "old": 2, "new": 4, "why": "slow_start"},
            {"at_s": 1.0, "endpoint": url, "worker": "gw0", "old": 4, "new": 2, "why": "429"},
            {"at_s": 1.25, "endpoint": url, "worker": "gw1", "old": 4, "new": 8, "why": "slow_start"},
            {"at_s": 1.5, "endpoint": url, "worker": "gw0", "old": 2, "new": 3, "why": "successes"},
            {"at_s": 1.75, "endpoint": url, "worker": "gw1", "old": 8, "new": 4, "why": "503"},
            {"at_s": 2.0, "endpoint": url, "worker": "gw1", "old": 4, "new": 3, "why": "503"},
        ],
    }  # fmt: skip
    assert concurrency_lines(summary) == [
        "concurrency auto  http://h:8000/v1: 2 workers, limits 2 -> 3 and 2 -> 3 (found), 2 cuts on 503, "
        "1 on 429"
    ]


@pytest.mark.parametrize(
    ("finals", "line"),
    [
        (
            [3, 3],
            "concurrency auto  http://h/v1: 2 workers, limits 4 -> 3 and 4 -> 3 (found), 53 cuts on 429",
        ),
        (
            [1, 2, 3],
            "concurrency auto  http://h/v1: 3 workers, limits 4 -> 1, 4 -> 2 and 4 -> 3 (found), "
            "53 cuts on 429",
        ),
    ],
)
def test_several_workers_are_shown_each_with_its_own_limit(finals: list[int], line: str) -> None:
    """Each worker adapts alone: their limits added up (4 -> 6 against a server that takes 3)
    would claim a limit no process ever had."""
    reports = [
        {"endpoint": "http://h/v1", "worker": f"gw{i}", "start": 4, "final": final, "max": 32, "changes": []}
        for i, final in enumerate(finals)
    ]
    summary = concurrency_summary(reports, started=0.0)
    assert summary is not None
    summary["endpoints"]["http://h/v1"]["cuts"] = {"429": 53}
    assert concurrency_lines(summary) == [line]


@pytest.mark.parametrize(
    ("final", "cuts", "line"),
    [
        (12, {"429": 3}, "concurrency auto  http://h/v1: 4 -> 12 (found), 3 cuts on 429"),
        (12, {"429": 1}, "concurrency auto  http://h/v1: 4 -> 12 (found), 1 cut on 429"),
        (64, {}, "concurrency auto  http://h/v1: 4 -> 64 (at --concurrency-max), no cuts"),
        (9, {}, "concurrency auto  http://h/v1: 4 -> 9 (no overload seen), no cuts"),
    ],
)
def test_one_terminal_line_per_endpoint(final: int, cuts: dict[str, int], line: str) -> None:
    entry = {
        "start": 4,
        "final": final,
        "peak": 12,
        "max": 64,
        "doublings": 2,
        "increases": 9,
        "cuts": cuts,
        "workers": 1,
    }
    assert concurrency_lines({"endpoints": {"http://h/v1": entry}, "history": []}) == [line]
    assert concurrency_lines(None) == [] and concurrency_summary([], 0.0) is None  # a fixed --concurrency


def test_the_server_refuses_requests_over_its_rate_limit_with_a_429() -> None:
    """max_concurrent=2 and three requests at once: the third gets a 429 with Retry-After."""
    with OpenAITestServer(latency_ms=300, max_concurrent=2) as server:
        statuses: list[tuple[int, str | None, str]] = []

        def post(seed: int) -> None:
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "seed": seed}
            request = urllib.request.Request(
                f"{server.url}/chat/completions",
                json.dumps(body).encode(),
                {"Content-Type": "application/json"},
            )
            try:
                with urllib.request.urlopen(request, timeout=10) as reply:
                    statuses.append((reply.status, None, ""))
            except urllib.error.HTTPError as refused:
                message = json.loads(refused.read())["error"]["message"]
                statuses.append((refused.code, refused.headers.get("Retry-After"), message))

        threads = [threading.Thread(target=post, args=(seed,)) for seed in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stats = server.stats()
    assert sorted(statuses) == [
        (200, None, ""),
        (200, None, ""),
        (429, "0.1", "Rate limit reached: at most 2 requests at once (max_concurrent)."),
    ]
    assert stats["outcomes"] == {"ok": 2, "rate_limited": 1}
    assert stats["rate_limit"] == {"max_concurrent": 2, "refused": 1, "max_admitted": 2}


def cuts(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [change for change in history if change["why"] not in ("slow_start", "successes")]


def check_history(history: list[dict[str, Any]], start: int, final: int, ceiling: int) -> None:
    """One process's history follows the rules, whatever the timing: a chain of changes
    from `start` to `final`, slow start (x2, or to the ceiling) only before the first cut,
    +1 only after it, every cut to below the limit it cut, all within 1 and the ceiling."""
    limit, slow_start = start, True
    for change in history:
        assert change["old"] == limit, history
        old, new, why = change["old"], change["new"], change["why"]
        if why == "slow_start":
            assert slow_start and new == min(2 * old, ceiling), change
        elif why == "successes":
            assert not slow_start and new == old + 1, change
        else:
            assert 1 <= new < old, change
            slow_start = False
        assert 1 <= new <= ceiling, change
        limit = new
    assert limit == final, history


def test_the_sampler_finds_the_servers_limit() -> None:
    """300 requests through a server that takes 6 at once: every one completes and is
    served once, the limit doubles from 4 until a 429 and follows the rules after it,
    and every cut came from a limit past the server's (a 429 to a request sent under the
    current limit needs K others of this sampler in flight: the limit was K + 1 or more)."""
    with OpenAITestServer(latency_ms=30, max_concurrent=K) as server:

        async def run() -> dict[str, Any]:
            sampler = OpenAISampler([server.url], "mock-model", concurrency=64, adaptive_start=4)
            params = [SamplingParams(1.0, 1.0, 0, 64, seed) for seed in range(300)]
            try:
                await asyncio.gather(
                    *(sampler.complete([{"role": "user", "content": "hi"}], p) for p in params)
                )
                return sampler.stats()
            finally:
                await sampler.aclose()

        stats = asyncio.run(run())
        served = server.stats()
    (report,) = stats["concurrency"]
    summary = concurrency_summary([report], 0.0)
    assert summary is not None
    found = [change["old"] for change in cuts(summary["history"])]
    assert (stats["ok"], served["outcomes"]["ok"]) == (300, 300)  # completes, nothing served twice
    assert served["rate_limit"]["max_admitted"] == K
    assert stats.get("retry_429", 0) == served["rate_limit"]["refused"] >= len(found) >= 1
    assert all(old >= K + 1 for old in found), found
    check_history(summary["history"], 4, report["final"], 64)


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_a_run_with_concurrency_auto_finds_the_rate_limit(run_suite, workers: list[str]) -> None:
    """160 generations through a server that takes K = 6 at once: the run completes, each
    generation is served once, every 429 is retried, each process found the limit (at
    least one cut) and its history follows the rules. How many 429s it takes depends on
    timing (under -n 2 each worker learns only of its own: 11 to 57 of about 180 seen), so
    no count of them is asserted."""
    with OpenAITestServer(latency_ms=30, max_concurrent=K, answers={"30 + 40": "\\boxed{70}"}) as server:
        result, out = run_suite(f"--endpoint={server.url}", "--concurrency=auto", "--val-n=40", *workers)
        served = server.stats()
    _, (summary,) = read_results(out)
    assert summary["complete"] is True and summary["generations"] == 160, result.stdout.str()
    assert served["outcomes"]["ok"] == 160  # nothing served twice
    refused = served["rate_limit"]["refused"]
    assert summary["backend"].get("retry_429", 0) == refused
    concurrency = summary["concurrency"]
    (entry,) = concurrency["endpoints"].values()
    assert (entry["start"], entry["max"], entry["workers"]) == (4, 64, 1 + bool(workers))
    history = concurrency["history"]
    assert sum(entry["cuts"].values()) == len(cuts(history)) >= 1
    for worker, own in entry["per_worker"].items():
        mine = [change for change in history if change["worker"] == worker]
        check_history(mine, own["start"], own["final"], 64 // len(entry["per_worker"]))
    shown = "2 workers, limits * -> * and * -> * (found)" if workers else "4 -> * (found)"
    result.stdout.fnmatch_lines([f"concurrency auto  {server.url}: {shown}, * on 429*"])
    found = [change["old"] for change in cuts(history)]
    print(f"refused {refused} of {served['total_requests']} requests; cut at {found}")


def test_a_400_saying_the_queue_is_full_is_retried_and_halves_the_limit() -> None:
    """SGLang-style: a 400 whose message says the queue is full. Before, a 400 was fatal
    and stopped the run; now it is retried as `overloaded` and halves auto's limit. The
    test server sends no such 400, so a small aiohttp app on a real socket does."""
    from aiohttp import web

    replies = iter([web.json_response({"error": {"message": "The request queue is full."}}, status=400)])

    async def chat(request: web.Request) -> web.Response:
        await request.read()
        reply = next(replies, None)
        if reply is not None:
            return reply
        choice = {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        return web.json_response({"choices": [choice], "usage": {"prompt_tokens": 1, "completion_tokens": 1}})

    async def run() -> dict[str, Any]:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        sampler = OpenAISampler(
            [f"http://127.0.0.1:{port}/v1"], "m", concurrency=8, adaptive_start=4, stream=False
        )
        try:
            completion = await sampler.complete(
                [{"role": "user", "content": "hi"}], SamplingParams(1.0, 1.0, 0, 8, 0)
            )
            assert completion.text == "ok"
            return sampler.stats()
        finally:
            await sampler.aclose()
            await runner.cleanup()

    stats = asyncio.run(run())
    (report,) = stats["concurrency"]
    assert (stats["retry_overloaded"], stats["ok"], [change[1:] for change in report["changes"]]) == (
        1,
        1,
        [[4, 2, "overloaded"]],
    )


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ("--concurrency=lots",),
            "ERROR: --concurrency: 'lots' is not a number >= 1 or auto (e.g. --concurrency 32, or "
            "--concurrency auto to find each endpoint's limit)",
        ),
        (
            ("--concurrency=auto", "--concurrency-max=1", "-n", "2"),
            "ERROR: --concurrency-max 1 is below the 2 xdist workers that share each endpoint: each "
            "worker sends at least one request at a time, so an endpoint would get 2; pass "
            "--concurrency-max 2 or more, or fewer workers (-n 1)",
        ),
    ],
    ids=["not-a-count", "max-below-the-workers"],
)
def test_bad_concurrency_settings_stop_the_run_at_start_up(
    run_suite, args: tuple[str, ...], line: str
) -> None:
    with OpenAITestServer() as server:
        result, _ = run_suite(f"--endpoint={server.url}", *args)
        sent = server.stats()["total_requests"]
    assert (result.ret, [x for x in result.errlines if x.startswith("ERROR")], sent) == (4, [line], 0)
