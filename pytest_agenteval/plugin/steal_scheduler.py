"""The controller's side of `stealing`: xdist's work-stealing scheduler, whose refused
steals are asked again only after the refusing worker finishes an item, and which starts
each worker as soon as it has collected. Imported only when xdist builds its scheduler
(xdist.scheduler costs about 25 ms to import)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from xdist.scheduler import WorkStealingScheduling


class PaidOnceStealing(WorkStealingScheduling):
    """Work stealing (a long queue per worker, which it prefetches) whose refused steals
    are asked again only after the refusing worker finishes an item.

    Scheduling starts at the first worker's collection, not the last one's (issue 14: the
    first worker idled until the slowest had collected). A worker that collects while
    others are still awaited is sent its share of what is pending (divided among it and
    them, at least one item), so the later ones get theirs without stealing; the last one
    awaited gets the rest by stock distribution. Until then the rest is kept for them: a
    worker down to its last item waits rather than being shut down, and a worker that
    goes before collecting releases its share to the others. One that has not collected
    is sent nothing, and the run does not end before every worker has collected or gone,
    so that every collection is compared.

    A later worker whose collection differs from the first one's is reported (a failed
    collect report, as xdist does), sent nothing and shut down; its items run on the
    others and the run fails. Stock xdist compares all collections at once and aborts the
    run, running nothing, when they differ."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        super().__init__(config, log)
        self._refused_by: Any = None
        self._collecting: list[Any] = []  # up, not collected: outside node2pending until then
        self._awaited = self.numnodes  # expected workers that have neither collected nor gone
        self._up = 0  # workers added so far: past numnodes, each is a crashed one's replacement

    @property
    def nodes(self) -> list[Any]:
        """Those still collecting too: xdist's session shuts down and removes what it lists."""
        return [*self.node2pending, *self._collecting]

    @property
    def collection_is_completed(self) -> bool:
        """True from the first collection on: xdist's session calls `schedule` once this
        holds, and again at each later collection."""
        return bool(self.node2collection)

    @property
    def tests_finished(self) -> bool:
        """Not while a worker is still collecting: its collection is compared first (when
        the first one's items ran out before, xdist's session would end the run and never
        look at it, and a differing collection would go unreported)."""
        return not self._awaited and super().tests_finished

    def add_node(self, node: Any) -> None:
        if self._up >= self.numnodes and self._awaited:  # a replacement: awaited as well
            self._awaited += 1
        self._up += 1
        self._collecting.append(node)

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        self._collecting.remove(node)
        self._awaited = max(0, self._awaited - 1)
        self.node2collection[node] = list(collection)
        if not self._check_nodes_have_same_collection():  # reports the difference
            del self.node2collection[node]
            node.shutdown()
            return
        self.node2pending[node] = []

    def check_schedule(self) -> None:
        if not self._awaited:
            super().check_schedule()
            return
        # Workers are still collecting: what is pending is theirs, and one that has run its
        # share waits for them. One that has just collected (nothing queued: a worker keeps
        # its last item until it is told there is no more) is sent its own share.
        joined = [
            node for node, pending in self.node2pending.items() if not pending and not node.shutting_down
        ]
        for i, node in enumerate(joined):
            self._send_tests(node, max(1, len(self.pending) // (len(joined) - i + self._awaited)))

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
        if node in self._collecting:  # gone before collecting: its share goes to the others
            self._collecting.remove(node)
            self._awaited = max(0, self._awaited - 1)
            self.check_schedule()
            return None
        return super().remove_node(node)
