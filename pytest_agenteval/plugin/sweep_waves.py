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
            if self.held and not self._awaited and self._would_shut_down():
                # no running wave's item is left for an idle worker (xdist would shut it
                # down, and a worker on its last item runs it only once told there is no
                # more): it takes the held items and waits there for their server
                self._release()
            # a worker whose next item waits for a later wave's server must not be sent a
            # running wave's items: it runs its queue in order, so they would wait behind it
            blocked = {
                n: q for n, q in self.node2pending.items() if q and self.waiting(self.collection[q[0]])
            }
            for node in blocked:
                del self.node2pending[node]
            try:
                super().check_schedule()
            finally:
                self.node2pending.update(blocked)
            return
        super().check_schedule()

    def _release(self) -> None:
        """Each idle worker its share of what is pending, then its share of the held."""
        idle = [n for n, p in self.node2pending.items() if not n.shutting_down and len(p) < MIN_PENDING]
        current, later = list(self.pending), list(self.held)
        self.held = []
        for i, node in enumerate(idle):
            rest = len(idle) - i
            mine = current[: len(current) // rest] + later[: len(later) // rest]
            current, later = current[len(current) // rest :], later[len(later) // rest :]
            self.pending[:] = mine
            self._send_tests(node, len(mine))
        self.pending[:] = current + later

    def _hold(self) -> None:
        """Release the held items whose server is up; hold back the pending ones whose is not."""
        collection = self.collection
        assert collection is not None
        items = sorted({*self.pending, *self.held})
        self.held = [i for i in items if self.waiting(collection[i])]
        held = set(self.held)
        self.pending[:] = [i for i in items if i not in held]

    def _would_shut_down(self) -> bool:
        """xdist's `check_schedule` on what is pending now would end with idle workers and
        nothing to steal for them (its own rules, played out on the queue lengths)."""
        queues = {node: len(pending) for node, pending in self.node2pending.items() if not node.shutting_down}
        idle = [node for node, size in queues.items() if size < MIN_PENDING]
        if not idle:
            return False
        left = len(self.pending)
        for i, node in enumerate(idle):  # pending is shared evenly among the idle ones
            sent = left // (len(idle) - i)
            queues[node] += sent
            left -= sent
        if all(size >= MIN_PENDING for size in queues.values()) or self.steal_requested_from_node is not None:
            return False
        longest = max(queues.values(), default=0)
        return min(longest // 2, max(0, longest - MIN_PENDING)) == 0
