"""xdist scheduling for a sweep whose servers start in waves (`--serve` with more servers
than slots): the items of a model whose server is not up yet are held back while an item
of a running wave is left to hand out or to steal, so no worker blocks on a later wave while
the earlier one still has work. A worker that would otherwise go idle (and be shut down)
takes the held items, and waits there for their server. Imported only when xdist builds
its scheduler (plugin/sweep_servers.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from xdist.scheduler.worksteal import MIN_PENDING

from pytest_agenteval.plugin.steal_scheduler import PaidOnceStealing


class WaveStealing(PaidOnceStealing):
    """`PaidOnceStealing` that holds back the items `waiting(nodeid)` says are a later
    wave's, until their server is up or no other work is left."""

    def __init__(self, config: pytest.Config, log: Any, waiting: Callable[[str], bool]) -> None:
        super().__init__(config, log)
        self.waiting = waiting
        self.held: list[int] = []  # collection indices, in order

    @property
    def tests_finished(self) -> bool:
        return not self.held and super().tests_finished

    @property
    def has_pending(self) -> bool:
        return bool(self.held) or super().has_pending

    def check_schedule(self) -> None:
        if self.collection is not None:
            self._hold()
            if self.held and not self.pending and self._nothing_else():
                # no running wave's item is left to give an idle worker: it takes the held
                # ones (it would be shut down otherwise) and waits there for their server
                self.pending[:], self.held = self.held, []
        super().check_schedule()

    def _hold(self) -> None:
        """Release the held items whose server is up; hold back the pending ones whose is not."""
        collection = self.collection
        assert collection is not None
        items = sorted({*self.pending, *self.held})
        self.held = [i for i in items if self.waiting(collection[i])]
        held = set(self.held)
        self.pending[:] = [i for i in items if i not in held]

    def _nothing_else(self) -> bool:
        """An idle worker would get nothing: no steal is on its way and no queue is long
        enough to steal from (xdist's own rule)."""
        nodes = [(node, pending) for node, pending in self.node2pending.items() if not node.shutting_down]
        if not any(len(pending) < MIN_PENDING for _, pending in nodes):
            return False  # nobody idle: nothing to decide yet
        if self.steal_requested_from_node is not None:
            return False
        longest = max((len(pending) for _, pending in nodes), default=0)
        return min(longest // 2, max(0, longest - MIN_PENDING)) == 0
