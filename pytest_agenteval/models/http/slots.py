"""Semaphores whose waiters are served by priority, so the items pytest will run next
get the connection slots first and prefetched work never starves them: one pool
(PrioritySlots), or a number of slots on each endpoint (EndpointSlots): fixed, or found
by AIMD from the replies (`--concurrency auto`, models/http/aimd.py)."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from pytest_agenteval.models.http.aimd import OVERLOAD_CAUSES, AimdLimit, LimitChange


class PrioritySlots:
    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        self._free = capacity
        self._waiters: list[tuple[tuple[float, int], int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    @property
    def in_use(self) -> int:
        return self.capacity - self._free

    async def acquire(self, priority: tuple[float, int]) -> None:
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (priority, next(self._order), future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # granted and cancelled in the same tick: hand it on
            raise

    def release(self) -> None:
        while self._waiters:
            _, _, future = heapq.heappop(self._waiters)
            if not future.done():
                future.set_result(None)
                return
        self._free += 1

    @asynccontextmanager
    async def slot(self, priority: tuple[float, int]) -> AsyncIterator[None]:
        await self.acquire(priority)
        try:
            yield
        finally:
            self.release()


Choose = Callable[[Mapping[str, int], frozenset[str]], tuple[str | None, float | None]]
Grant = asyncio.Future[tuple[str | None, float]]


class EndpointSlots:
    """`capacity` requests in flight on each endpoint, at all times: not a pool of
    capacity x endpoints that the endpoints left in the rotation would share while the
    others fail. Waiters are served by priority; the first in line is given the endpoint
    its `choose(in_use, full)` picks among those with a free slot. `choose` returns
    (endpoint, 0) to take one of its slots, (None, None) to wait for a slot to free up,
    or (None, seconds) when no endpoint is in the rotation (the waiter sleeps, holding
    nothing). One instance may serve several samplers of the same endpoints.

    With `start` (`--concurrency auto`), each endpoint's limit starts there and moves
    between 1 and `capacity` with the outcomes `release` is told (AIMD); a lower limit
    cancels nothing: the requests over it finish, and no new one goes out until the
    endpoint is back under it."""

    def __init__(self, endpoints: Sequence[str], capacity: int, start: int | None = None) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        self.in_use = Counter[str]({url: 0 for url in endpoints})
        self.adaptive = {url: AimdLimit(url, start, capacity) for url in endpoints} if start else {}
        self.changes: list[LimitChange] = []
        self._waiters: list[
            tuple[tuple[float, int], int, asyncio.Future[tuple[str | None, float]], Choose]
        ] = []
        self._order = itertools.count()

    async def acquire(self, priority: tuple[float, int], choose: Choose) -> tuple[str | None, float]:
        """(endpoint, 0.0) with one of its slots taken (give it back with `release`), or
        (None, seconds to wait) when no endpoint is in the rotation."""
        future: Grant = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (priority, next(self._order), future, choose))
        self._dispatch()
        try:
            return await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                endpoint, _ = future.result()
                if endpoint is not None:
                    self.release(endpoint)  # granted and cancelled in the same tick: hand it on
            else:
                self._dispatch()  # the first in line left: the next may fit
            raise

    def limit(self, endpoint: str) -> int:
        """Requests that may be in flight on `endpoint` now."""
        adaptive = self.adaptive.get(endpoint)
        return adaptive.limit if adaptive is not None else self.capacity

    def release(self, endpoint: str, outcome: str | None = None, sent: float = 0.0) -> None:
        """Give the slot back. `outcome` (adaptive slots learn from it): "ok", a retry's
        cause ("429", "503", "overloaded", ...), or None (no reply that says anything about
        load: a refused request, a cancellation); `sent`: when the request went out
        (time.monotonic(): a reply to a request sent before the limit's last change does
        not move it)."""
        adaptive = self.adaptive.get(endpoint)
        if adaptive is not None and outcome is not None:
            change = None
            if outcome == "ok":
                change = adaptive.succeeded(sent, busy=self.in_use[endpoint] >= adaptive.limit)
            elif outcome in OVERLOAD_CAUSES:
                change = adaptive.overloaded(outcome, sent)
            if change is not None:
                self.changes.append(change)
        self.in_use[endpoint] -= 1
        self._dispatch()

    def report(self) -> list[dict[str, Any]]:
        """Each adaptive endpoint's limits and changes, as plain data for the summary
        (`at`: time.time() of each change)."""
        return [
            {
                "endpoint": url,
                "start": limit.start,
                "final": limit.limit,
                "max": limit.ceiling,
                "changes": [[c.at, c.old, c.new, c.why] for c in self.changes if c.endpoint == url],
            }
            for url, limit in self.adaptive.items()
        ]

    def _dispatch(self) -> None:
        """Grant waiters in priority order. A waiter that fits nowhere (it avoids the only
        endpoint with a free slot: a retry after that endpoint failed it) keeps its place,
        and the next waiter that fits takes the slot instead of idling behind it."""
        while self._waiters:
            if self._grant(0):
                continue  # the first in line (the common case: a heap pop)
            if all(used >= self.limit(url) for url, used in self.in_use.items()):
                return  # every endpoint is at capacity: the next release
            behind = sorted(range(1, len(self._waiters)), key=lambda i: self._waiters[i][:2])
            if not any(self._grant(i) for i in behind):
                return  # none fits: the next release

    def _grant(self, index: int) -> bool:
        """Settle the waiter at `index` of the heap if it can be (a slot, a wait outside the
        rotation, its own error; cancelled: dropped). False when every endpoint it may use
        is at capacity."""
        _, _, future, choose = self._waiters[index]
        if not future.done():
            full = frozenset(url for url, used in self.in_use.items() if used >= self.limit(url))
            try:
                endpoint, wait = choose(self.in_use, full)
            except Exception as exc:  # noqa: BLE001 - the waiter's own error (every server died)
                future.set_exception(exc)
            else:
                if endpoint is None and wait is None:
                    return False
                if endpoint is not None:
                    self.in_use[endpoint] += 1
                future.set_result((endpoint, wait or 0.0))
        if index == 0:
            heapq.heappop(self._waiters)
        else:
            self._waiters[index] = self._waiters[-1]
            self._waiters.pop()
            heapq.heapify(self._waiters)
        return True
