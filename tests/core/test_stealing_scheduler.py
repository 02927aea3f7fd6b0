"""The controller side of paid-once work stealing, driven event by event: a refused
steal waits for the refusing worker's next finished item, and never deadlocks a worker
that is on its last item (which finishes only once it is told there is no more)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_agenteval.steal_scheduler import PaidOnceStealing


class FakeNode:
    """What the scheduler calls on a worker, recorded."""

    def __init__(self, name: str) -> None:
        self.name, self.shutting_down = name, False
        self.gateway = type("Gateway", (), {"id": name})()
        self.sent: list[int] = []
        self.steals: list[list[int]] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def send_steal(self, indices: list[int]) -> None:
        self.steals.append(list(indices))

    def shutdown(self) -> None:
        self.shutting_down = True


def ids(items: int) -> list[str]:
    return [f"t{i}" for i in range(items)]


def collect(sched: Any, node: FakeNode, collection: list[str]) -> None:
    """A worker's collection, as xdist's session hands it over (`worker_collectionfinish`)."""
    sched.add_node_collection(node, collection)
    if sched.collection_is_completed:
        sched.schedule()


def scheduler(
    pytester: pytest.Pytester, items: int, collected: int = 2
) -> tuple[PaidOnceStealing, FakeNode, FakeNode]:
    """Two workers a and b, up; the first `collected` of them have collected `items` items."""
    config = pytester.parseconfig("--tx", "2*popen")
    sched = PaidOnceStealing(config)
    a, b = FakeNode("a"), FakeNode("b")
    for node in (a, b):
        sched.add_node(node)  # type: ignore[arg-type]
    for node in (a, b)[:collected]:
        collect(sched, node, ids(items))
    return sched, a, b


def finish(sched: Any, node: FakeNode, index: int) -> None:
    sched.mark_test_complete(node, index)


def test_a_refusal_waits_for_the_next_finished_item_then_asks_again(pytester: pytest.Pytester) -> None:
    sched, a, b = scheduler(pytester, 12)
    assert (a.sent, b.sent) == (list(range(6)), list(range(6, 12)))
    for index in range(6, 11):  # b runs dry: it asks a for the tail of its queue
        finish(sched, b, index)
    assert a.steals == [[3, 4, 5]]
    sched.remove_pending_tests_from_node(a, [])  # all of it already generating on a
    finish(sched, b, 11)
    assert a.steals == [[3, 4, 5]]  # not asked again in a loop...
    finish(sched, a, 0)
    assert a.steals == [[3, 4, 5], [4, 5]]  # ...but once a finished an item
    sched.remove_pending_tests_from_node(a, [5])  # a partial steal goes to b
    assert b.sent[-1] == 5 and sched.node2pending[a] == [1, 2, 3, 4]


def test_a_refusal_by_a_worker_on_its_last_item_shuts_the_idle_ones_down(pytester: pytest.Pytester) -> None:
    sched, a, b = scheduler(pytester, 12)
    for index in range(6, 11):
        finish(sched, b, index)
    assert a.steals == [[3, 4, 5]]
    for index in range(5):  # a finishes all but its last item before the refusal arrives
        finish(sched, a, index)
    sched.remove_pending_tests_from_node(a, [])
    # a can finish item 5 only when told there is nothing more: nobody may wait for it
    assert sched.steal_requested_from_node is None
    assert a.shutting_down and b.shutting_down
