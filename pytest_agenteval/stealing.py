"""xdist work stealing that never pays for a generation twice.

Each worker prefetches the items queued to it (`plugin.pytest_runtest_protocol`), so by
the time an idle worker steals the tail of a busy worker's queue, the busy worker may
already have sent those items' requests. Stock xdist then runs them again on the thief:
the same messages and seeds, requested twice (issue 14: 124 requests for 120
generations). Here a worker gives up only items none of whose rollouts has started, and
the controller waits for the next finished item before asking again instead of asking in
a loop when everything queued is already generating."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest
from xdist.scheduler import WorkStealingScheduling

from .items import problem_of, suite_of, worker_interactor

STEAL_LOCK = pytest.StashKey[threading.Lock]()


class PaidOnceStealing(WorkStealingScheduling):
    """Work stealing (a long queue per worker, which it prefetches) whose refused steals
    are asked again only after the refusing worker finishes an item."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        super().__init__(config, log)
        self._refused_by: Any = None

    def remove_pending_tests_from_node(self, node: Any, indices: Sequence[int]) -> None:
        if indices or len(self.node2pending.get(node, ())) < 2:
            # stolen; or refused by a worker on its last item, which finishes only once
            # it is told there is nothing more (stock behaviour: the idle ones shut down)
            super().remove_pending_tests_from_node(node, indices)
            return
        # Everything asked for is already generating there, and it has a next item, so
        # it will report a finished one: until then keep the request marked outstanding
        # (no new one), rather than asking again in a loop.
        self._refused_by = node

    def mark_test_complete(self, node: Any, item_index: int, duration: float | None = None) -> None:
        if self._refused_by is node:
            self._refused_by = None
            self.steal_requested_from_node = None
        super().mark_test_complete(node, item_index, duration)

    def remove_node(self, node: Any) -> str | None:
        if self._refused_by is node:
            self._refused_by = None
        return super().remove_node(node)


def install_worker_guard(config: pytest.Config, engine: Any) -> threading.Lock | None:
    """On an xdist worker: answer the controller's steal requests with only the items whose
    rollouts have not started (`Engine.withdraw` cancels those atomically); `engine()`
    returns the process's engine, or None before one exists. Returns the
    lock the prefetcher holds while it reads the queue and submits, so an item cannot be
    stolen between the two; None when this process is not a worker."""
    interactor = worker_interactor(config)
    if interactor is None:
        return None
    lock = threading.Lock()

    def steal(indices: Sequence[int]) -> None:  # on execnet's receiver thread
        requested = set(indices)
        with lock, interactor.torun.lock() as queue:
            queued = [i for i in queue if isinstance(i, int) and i in requested]
            items = interactor.session.items
            started = engine()  # None: nothing has run ahead here yet, all of it may go
            prefixes = [_item_prefix(items[i]) for i in queued]
            answers = started.withdraw(prefixes) if started is not None else [True] * len(queued)
            stolen = [i for i, free in zip(queued, answers, strict=True) if free]
            if stolen:
                gone = set(stolen)
                interactor.torun.replace([i for i in queue if i not in gone])
        interactor.sendevent("unscheduled", indices=stolen)

    interactor.steal = steal  # handle_command calls self.steal
    config.stash[STEAL_LOCK] = lock
    return lock


def _item_prefix(item: pytest.Item) -> tuple[str, str]:
    """The engine-key prefix of an item's rollouts: (suite, node id)."""
    suite, problem = suite_of(getattr(item, "module", None)), problem_of(item)
    if suite is None or problem is None:
        return ("", item.nodeid)  # not an evaluation item: nothing of it runs ahead
    return (suite.name, problem.node_id)
