"""A semaphore whose waiters are served by priority, so the items pytest will run
next get the connection slots first and prefetched work never starves them."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


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
