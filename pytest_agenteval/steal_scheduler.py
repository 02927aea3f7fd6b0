"""The controller's side of `stealing`: xdist's work-stealing scheduler, whose refused
steals are asked again only after the refusing worker finishes an item. Imported only
when xdist builds its scheduler (xdist.scheduler costs about 25 ms to import)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from xdist.scheduler import WorkStealingScheduling


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
