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
        self._stolen: set[int] = set()  # a later wave's, stolen for an idle worker: not held again

    @property
    def tests_finished(self) -> bool:
        return not self.held and super().tests_finished

    @property
    def has_pending(self) -> bool:
        return bool(self.held) or super().has_pending

    def check_schedule(self) -> None:
        if self.collection is None:
            super().check_schedule()
            return
        self._hold()
        collection = self.collection
        # A worker whose next item waits for a later wave's server ("blocked") runs its
        # queue in order: a running wave's item sent to it would wait behind that item, and
        # the wave would never end. Nothing is sent to it, and it is not shut down (it would
        # leave the later wave a worker short); xdist's rules never see one with fewer than
        # MIN_PENDING items (it would be sent work or shut down). One with more stays in
        # view: its tail, a later wave's items it has not started, may be stolen.
        blocked = {n for n, q in self.node2pending.items() if q and self.waiting(collection[q[0]])}
        order = list(self.node2pending)
        hidden = {
            n: self.node2pending.pop(n)
            for n in order
            if n in blocked and len(self.node2pending[n]) < MIN_PENDING
        }
        try:
            if self.held and not self._awaited and self._would_shut_down(blocked):
                # no running wave's item is left for an idle worker (xdist would shut it
                # down, and a worker on its last item runs it only once told there is no
                # more): it takes the held items and waits there for their server
                self._release(blocked)
            super().check_schedule()
        finally:
            self._stolen &= set(self.pending)
            queues = {**self.node2pending, **hidden}
            self.node2pending.clear()
            self.node2pending.update({n: queues[n] for n in order if n in queues})
            self.node2pending.update({n: q for n, q in queues.items() if n not in order})

    def remove_pending_tests_from_node(self, node: Any, indices: Any) -> None:
        self._stolen.update(indices)  # for the idle worker that asked, whatever their wave
        super().remove_pending_tests_from_node(node, indices)

    def _idle(self, blocked: set[Any]) -> list[Any]:
        """The workers free to be sent items: up, short of work, not waiting on a later wave."""
        return [
            n
            for n, p in self.node2pending.items()
            if not n.shutting_down and n not in blocked and len(p) < MIN_PENDING
        ]

    def _release(self, blocked: set[Any]) -> None:
        """Each idle worker its share of what is pending, then its share of the held."""
        idle = self._idle(blocked)
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
        self.held = [i for i in items if i not in self._stolen and self.waiting(collection[i])]
        held = set(self.held)
        self.pending[:] = [i for i in items if i not in held]

    def _would_shut_down(self, blocked: set[Any]) -> bool:
        """xdist's `check_schedule` on what is pending now would leave an idle worker with
        no running wave's item to get or to steal (its own rules, played out on the queue
        lengths of the workers not waiting on a later wave: a waiting worker's queue is a
        later wave's)."""
        queues = {
            node: len(pending)
            for node, pending in self.node2pending.items()
            if not node.shutting_down and node not in blocked
        }
        idle = self._idle(blocked)
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
