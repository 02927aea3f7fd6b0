"""One background asyncio loop per process that runs rollouts ahead of the pytest
items that will need them, so the configured concurrency stays in flight even though
pytest runs one item at a time."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextvars
import heapq
import itertools
import threading
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pytest_agenteval.models import request_priority

T = TypeVar("T")
Priority = tuple[float, int]
URGENT = -1.0  # an item pytest is running now


@dataclass
class _Job:
    key: Hashable
    factory: Callable[[], Awaitable[Any]]
    priority: Priority
    future: cf.Future[Any] = field(default_factory=cf.Future)
    started: bool = False


class Engine:
    def __init__(self, max_active: int, whole_items: bool = False) -> None:
        self.max_active = max(1, max_active)
        # admit an item's queued samples together (a backend that batches them, like the
        # transformers one, then sees them all at once, whatever the timing)
        self.whole_items = whole_items
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="agenteval-engine", daemon=True)
        self._thread.start()
        self._lock = threading.Lock()
        self._jobs: dict[Hashable, _Job] = {}
        self._unfinished = 0  # jobs submitted, neither finished nor cancelled (under _lock)
        self._heap: list[tuple[Priority, int, _Job]] = []  # changed on the loop thread only
        self._order = itertools.count()
        self._active = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False

    # -- called from the main thread -------------------------------------------------
    def submit(self, key: Hashable, factory: Callable[[], Awaitable[T]], priority: Priority) -> cf.Future[T]:
        """Schedule `factory()` once per key; a second submit may only raise its priority."""
        return self.submit_all([(key, factory, priority)])[0]

    def submit_all(
        self, entries: Iterable[tuple[Hashable, Callable[[], Awaitable[Any]], Priority]]
    ) -> list[cf.Future[Any]]:
        """`submit` for several jobs (an item's samples) that reach the queue together, so
        whole-item admission sees all of them at once."""
        futures, pushed = [], []
        with self._lock:
            for key, factory, priority in entries:
                job = self._jobs.get(key)
                if job is None:
                    job = self._jobs[key] = _Job(key, factory, priority)
                    self._unfinished += 1
                    pushed.append(job)
                elif not job.started and priority < job.priority:
                    job.priority = priority
                    pushed.append(job)
                futures.append(job.future)
        if pushed:
            self._loop.call_soon_threadsafe(self._push, *pushed)
        return futures

    def release(self, keys: Iterable[Hashable]) -> None:
        """Forget jobs: finished ones free their results, queued ones never start."""
        with self._lock:
            for key in keys:
                job = self._jobs.pop(key, None)
                if job is not None and not job.started and job.future.cancel():
                    self._unfinished -= 1

    def withdraw(self, items: Iterable[tuple[Hashable, ...]]) -> list[bool]:
        """Per item (a key prefix that covers its samples): True, and its queued jobs
        cancelled, when none of them has started, so another process may run the item
        instead; False, and nothing touched, when one has (its requests are paid for here)."""
        answers = []
        with self._lock:  # _admit starts jobs under the same lock: no job starts meanwhile
            for prefix in items:
                jobs = [job for key, job in self._jobs.items() if key[: len(prefix)] == prefix]  # type: ignore[index]
                if any(job.started or job.future.done() for job in jobs):
                    answers.append(False)
                    continue
                for job in jobs:
                    if job.future.cancel():
                        self._unfinished -= 1
                    del self._jobs[job.key]
                answers.append(True)
        return answers

    @property
    def active(self) -> int:
        """Jobs running now."""
        return self._active

    def has_room(self) -> bool:
        """Fewer jobs running than may run and none waiting: more could start now."""
        return self._active < self.max_active and not self._heap

    def load(self) -> tuple[int, int]:
        """(jobs not finished, jobs held): queued or running; and those plus the finished
        ones nobody has released yet."""
        with self._lock:
            return self._unfinished, len(self._jobs)

    def pending_keys(self) -> set[Hashable]:
        with self._lock:
            return set(self._jobs)

    def run(self, coroutine: Awaitable[T], timeout: float | None = None) -> T:
        """Run one coroutine on the engine loop and wait for it."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)  # type: ignore[arg-type]

    def close(self, finalizers: Iterable[Callable[[], Awaitable[Any]]] = ()) -> list[str]:
        """Cancel what runs, run the finalizers, stop the loop. Never raises: returns the
        problems met, so a shutdown failure cannot cost the run its results."""
        self._closing = True
        problems: list[str] = []

        async def shutdown() -> None:
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            for finalize in finalizers:
                try:
                    await finalize()
                except Exception as exc:  # noqa: BLE001 - reported, not raised
                    problems.append(f"{type(exc).__name__}: {exc}")

        if self._thread.is_alive():
            try:
                self.run(shutdown(), timeout=30)
            except Exception as exc:  # noqa: BLE001 - a stuck finalizer: stop anyway
                problems.append(f"shutdown did not finish: {type(exc).__name__}")
            finally:
                self._loop.call_soon_threadsafe(self._loop.stop)
                self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()
        return problems

    # -- on the loop thread ----------------------------------------------------------
    def _push(self, *jobs: _Job) -> None:
        for job in jobs:
            heapq.heappush(self._heap, (job.priority, next(self._order), job))
        self._admit()

    def _admit(self) -> None:
        while self._active < self.max_active and self._heap:
            if self.whole_items and self._active and not self._next_item_fits():
                return  # wait for room for the whole item (an idle engine admits anyway)
            priority, _, job = heapq.heappop(self._heap)
            with self._lock:  # atomic against withdraw(): started, or cancelled, never both
                if job.started or job.future.cancelled() or priority != job.priority:
                    continue  # stale heap entry
                if not job.future.set_running_or_notify_cancel():
                    continue
                job.started = True
            self._active += 1
            context = contextvars.copy_context()
            context.run(request_priority.set, priority)
            task = context.run(self._loop.create_task, self._run(job))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _next_item_fits(self) -> bool:
        """Whether every queued sample of the next item (same item order) fits the free
        slots; samples already started do not count."""
        order = self._heap[0][0][0]
        waiting = sum(
            1
            for priority, _, job in self._heap
            if priority[0] == order
            and priority == job.priority
            and not job.started
            and not job.future.cancelled()
        )
        return waiting <= self.max_active - self._active

    async def _run(self, job: _Job) -> None:
        try:
            result = await job.factory()
        except asyncio.CancelledError:
            reason = "cancelled at shutdown" if self._closing else "cancelled"
            job.future.set_exception(RuntimeError(reason))
            raise
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting item
            job.future.set_exception(exc)
        else:
            job.future.set_result(result)
        finally:
            self._active -= 1
            with self._lock:
                self._unfinished -= 1
            self._admit()
