"""The rules of `--concurrency auto`'s limit (models/http/aimd.py), driven by scripted
sequences of replies, with exact limits: no server, no race. Slow start doubles after a
window of successes as large as the limit until the first overload, which halves it;
then +1 a window and a cut to 9/10 on each overload; a reply to a request sent before
the last change (a growth too) moves nothing."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from pytest_agenteval.models.http.aimd import AimdLimit
from pytest_agenteval.models.http.slots import EndpointSlots

Change = tuple[int, int, str]


def changes_after(start: int, ceiling: int, events: list[str]) -> tuple[list[Change], int]:
    """Event i happens at time i: "s" a success while the limit was reached, "i" one
    below it, a cause ("429", "503", ...) an overload; each of a request sent just
    before (after any earlier change). A trailing "<": the request went out at the very
    start, before every change. Returns the changes (old, new, why) and the last limit."""
    limit = AimdLimit("http://e/v1", start, ceiling)
    changes = []
    for now, event in enumerate(events):
        kind, stale = event.removesuffix("<"), event.endswith("<")
        sent = -1.0 if stale else now - 0.5
        if kind in ("s", "i"):
            change = limit.succeeded(sent, busy=kind == "s", now=float(now))
        else:
            change = limit.overloaded(kind, sent, now=float(now))
        if change is not None:
            changes.append((change.old, change.new, change.why))
    return changes, limit.limit


S, ADD = "slow_start", "successes"


@pytest.mark.parametrize(
    ("start", "ceiling", "events", "changes", "final"),
    [
        # slow start: a window of 4 successes at 4 doubles it, 8 at 8 doubles it again
        (4, 64, ["s"] * 11, [(4, 8, S)], 8),
        (4, 64, ["s"] * 12, [(4, 8, S), (8, 16, S)], 16),
        # never above the ceiling, in slow start as after it
        (4, 6, ["s"] * 20, [(4, 6, S)], 6),
        # the first 429 ends slow start and halves; then +1 a window as large as the limit
        (8, 64, ["429"] + ["s"] * 4 + ["s"] * 5, [(8, 4, "429"), (4, 5, ADD), (5, 6, ADD)], 6),
        # issue 35: one 429 at 8 gives 4; the seven replies sent at 8 leave it at 4 (they
        # gave 5); four replies of requests sent at 4 then make it 5
        (8, 64, ["429"] + ["s<"] * 7, [(8, 4, "429")], 4),
        (8, 64, ["429"] + ["s<"] * 7 + ["s"] * 4, [(8, 4, "429"), (4, 5, ADD)], 5),
        # a growth makes the older replies stale too: the 8 successes sent at 4 do not
        # double 8, nor does a 429 sent at 4 cut it; one sent at 8 does
        (4, 64, ["s"] * 4 + ["s<"] * 8 + ["429<"], [(4, 8, S)], 8),
        (4, 64, ["s"] * 4 + ["s<"] * 8 + ["429"], [(4, 8, S), (8, 4, "429")], 4),
        # one overload moves it once: 429s of requests sent before the cut do nothing
        (16, 64, ["429", "429<", "429<", "503<"], [(16, 8, "429")], 8),
        # after slow start each overload cuts to 9/10, by at least one, never below 1
        (
            16,
            64,
            ["429"] * 9,
            [
                (16, 8, "429"),
                (8, 7, "429"),
                (7, 6, "429"),
                (6, 5, "429"),
                (5, 4, "429"),
                (4, 3, "429"),
                (3, 2, "429"),
                (2, 1, "429"),
            ],
            1,
        ),  # fmt: skip
        # the sawtooth at a server that takes 128: 256 -> 128 -> 129 -> 116 (not 64)
        (
            128,
            256,
            ["s"] * 128 + ["429"] + ["s"] * 128 + ["429"],
            [(128, 256, S), (256, 128, "429"), (128, 129, ADD), (129, 116, "429")],
            116,
        ),
        # every overload cause ends slow start and cuts
        (16, 64, ["503", "529", "overloaded"], [(16, 8, "503"), (8, 7, "529"), (7, 6, "overloaded")], 6),
        # successes while the limit was not reached teach nothing
        (2, 64, ["i"] * 6, [], 2),
        # a change starts a new window: 3 successes at 4, halved to 2, then 2 more grow it
        (4, 64, ["s", "s", "s", "429", "s", "s"], [(4, 2, "429"), (2, 3, ADD)], 3),
        # at 1 a 429 changes nothing but ends slow start: the next growth is +1, not x2
        (1, 64, ["429", "s", "s", "s"], [(1, 2, ADD), (2, 3, ADD)], 3),
    ],
    ids=[
        "slow-start",
        "slow-start-twice",
        "ceiling",
        "429-ends-slow-start",
        "issue-35-no-regrowth",
        "issue-35-then-grows",
        "stale-after-growth",
        "fresh-after-growth",
        "once-per-overload",
        "cuts-to-nine-tenths",
        "sawtooth-at-128",
        "causes",
        "idle",
        "new-window",
        "floor-ends-slow-start",
    ],
)
def test_the_limit_after_a_scripted_sequence_of_replies(
    start: int, ceiling: int, events: list[str], changes: list[Change], final: int
) -> None:
    assert changes_after(start, ceiling, events) == (changes, final)


def test_each_change_is_recorded_with_its_endpoint_and_reason() -> None:
    limit = AimdLimit("http://e/v1", 2, 64)
    seen = [
        limit.succeeded(0.0, now=1.0),
        limit.succeeded(0.5, now=2.0),
        limit.overloaded("503", 2.5, now=3.0),
    ]
    assert [(c.endpoint, c.old, c.new, c.why) if c else None for c in seen] == [
        None,
        ("http://e/v1", 2, 4, "slow_start"),
        ("http://e/v1", 4, 2, "503"),
    ]


def test_a_request_sent_in_the_tick_of_a_change_counts() -> None:
    """`sent` equal to the change's time: sent under the new limit."""
    limit = AimdLimit("http://e/v1", 2, 64)
    limit.overloaded("429", sent=0.0, now=1.0)
    assert limit.limit == 1 and limit.succeeded(1.0, now=2.0) is not None and limit.limit == 2


@pytest.mark.parametrize(("start", "ceiling"), [(0, 4), (5, 4)])
def test_a_start_outside_1_and_the_ceiling_is_refused(start: int, ceiling: int) -> None:
    with pytest.raises(ValueError, match="need 1 <= start <= ceiling"):
        AimdLimit("http://e/v1", start, ceiling)


def least_loaded(in_use: Any, full: frozenset[str]) -> tuple[str | None, float | None]:
    free = sorted((n, url) for url, n in in_use.items() if url not in full)
    return (free[0][1], 0.0) if free else (None, None)


def test_replies_sent_before_a_429_do_not_regrow_the_limit() -> None:
    """Issue 35, through the slots the sampler uses: 8 in flight, one 429 halves the limit
    to 4; the seven other replies went out before the halving and say nothing about 4:
    the limit stays 4 (it was 5)."""

    async def run() -> list[int]:
        slots = EndpointSlots(["a"], 64, start=8)
        sent = time.monotonic()
        for i in range(8):
            await slots.acquire((0, i), least_loaded)
        slots.release("a", "429", sent)
        seen = [slots.limit("a")]
        for _ in range(7):
            slots.release("a", "ok", sent)
            seen.append(slots.limit("a"))
        return seen

    assert asyncio.run(run()) == [4] * 8
