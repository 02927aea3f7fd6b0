"""xdist work stealing that never pays for a generation twice.

Each worker prefetches the items queued to it (`plugin.pytest_runtest_protocol`), so by
the time an idle worker steals the tail of a busy worker's queue, the busy worker may
already have sent those items' requests. Stock xdist then runs them again on the thief:
the same messages and seeds, requested twice (issue 14: 124 requests for 120
generations). Here a worker gives up only items none of whose rollouts has started, and
the controller waits for the next finished item before asking again instead of asking in
a loop when everything queued is already generating.

This module is the worker's side and imports nothing of xdist (it is on the path to the
first request, with or without -n); the controller's scheduler is in `steal_scheduler`."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest

from pytest_agenteval.plugin.items import item_key, worker_interactor

STEAL_LOCK = pytest.StashKey[threading.Lock]()


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
    """The engine-key prefix of an item's rollouts; for an item that is not an
    evaluation one, a key nothing in the engine has."""
    return item_key(item) or ("", item.nodeid)
