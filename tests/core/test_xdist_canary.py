"""A canary for the private pytest-xdist internals the paid-once work stealing builds on
(docs/distributed.md). pyproject.toml pins pytest-xdist to the versions these checks pass
on; before widening the pin, run this file against the new version: each failure names
the internal that changed and the code that needs updating."""

from __future__ import annotations

import collections
import inspect
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import execnet
import pytest
import xdist
import xdist.remote
import xdist.workermanage
from xdist.dsession import DSession
from xdist.remote import WorkerInteractor
from xdist.scheduler import WorkStealingScheduling
from xdist.workermanage import WorkerController

SCHEDULER = "the work-stealing scheduler in plugin/steal_scheduler.py"
WORKER = "the worker side of the work stealing (plugin/stealing.py, plugin/items.py)"


def _params(function: Callable[..., Any]) -> list[str]:
    return list(inspect.signature(function).parameters)


def _source_has(function: Callable[..., Any], *lines: str) -> bool:
    source = inspect.getsource(function)
    return all(line in source for line in lines)


def _handle_command_steals() -> bool:
    """The worker hands a "steal" command to `self.steal(indices)`, which stealing.py replaces."""
    asked: list[Any] = []
    interactor = SimpleNamespace(log=lambda *args: None, steal=asked.append)
    WorkerInteractor.handle_command(interactor, ("steal", {"indices": [3, 4]}))  # type: ignore[arg-type]
    return asked == [[3, 4]]


def _test_queue_is_lockable_and_replaceable() -> bool:
    """`torun.lock()` yields the queue's deque; `torun.replace(items)` swaps its contents."""
    queue = xdist.remote.TestQueue(execnet.gateway_base.get_execmodel("thread"))  # 3.7 on
    for index in (1, 2, 3):
        queue.put(index)
    with queue.lock() as items:
        seen = (type(items), list(items))
        queue.replace(i for i in items if i != 2)
    with queue.lock() as items:
        return seen == (collections.deque, [1, 2, 3]) and list(items) == [1, 3]


def _scheduler_state(pytester: pytest.Pytester) -> dict[str, Any]:
    sched = WorkStealingScheduling(pytester.parseconfig("--tx", "2*popen"))
    names = ("numnodes", "node2pending", "node2collection", "pending", "steal_requested_from_node")
    return {name: getattr(sched, name, "<missing>") for name in names}


def _signature(name: str, *params: str) -> tuple[str, str, Callable[[], bool]]:
    """A method of WorkStealingScheduling, with these parameters after self."""
    method = getattr(WorkStealingScheduling, name, None)
    return (
        f"WorkStealingScheduling.{name}({', '.join(params)})",
        SCHEDULER,
        lambda: method is not None and _params(method) == ["self", *params],
    )


def _property(name: str) -> tuple[str, str, Callable[[], bool]]:
    """A property of WorkStealingScheduling (the subclass overrides some)."""
    found = inspect.getattr_static(WorkStealingScheduling, name, None)
    return f"WorkStealingScheduling.{name} (a property)", SCHEDULER, lambda: isinstance(found, property)


SCHEDULER_METHODS = [
    ("__init__", "config", "log"),
    ("add_node", "node"),
    ("add_node_collection", "node", "collection"),
    ("check_schedule",),
    ("schedule",),
    ("remove_pending_tests_from_node", "node", "indices"),
    ("mark_test_complete", "node", "item_index", "duration"),
    ("remove_node", "node"),
    ("_send_tests", "node", "num"),
    ("_check_nodes_have_same_collection",),
]
SCHEDULER_PROPERTIES = ["nodes", "collection_is_completed", "tests_finished", "has_pending"]

# (internal, who needs updating when it changes, check: True while it is as we use it)
CHECKS: list[tuple[str, str, Callable[[], bool]]] = [
    *(_signature(*method) for method in SCHEDULER_METHODS),
    *(_property(name) for name in SCHEDULER_PROPERTIES),
    (
        "WorkerController.send_runtest_some(indices), send_steal(indices), shutdown(), shutting_down",
        SCHEDULER,
        lambda: (
            _params(WorkerController.send_runtest_some) == ["self", "indices"]
            and _params(WorkerController.send_steal) == ["self", "indices"]
            and _params(WorkerController.shutdown) == ["self"]
            and isinstance(inspect.getattr_static(WorkerController, "shutting_down", None), property)
        ),
    ),
    (
        "DSession.worker_collectionfinish (schedules at each collection once collection_is_completed)",
        SCHEDULER,
        lambda: _source_has(
            DSession.worker_collectionfinish,
            "self.sched.add_node_collection(node, ids)",
            "if self.sched.collection_is_completed:",
            "self.sched.schedule()",
        ),
    ),
    (
        "DSession.worker_unscheduled(node, indices)",
        SCHEDULER,
        lambda: (
            _params(DSession.worker_unscheduled) == ["self", "node", "indices"]
            and _source_has(DSession.worker_unscheduled, "remove_pending_tests_from_node(node, indices)")
        ),
    ),
    ("WorkerInteractor.handle_command -> self.steal(indices)", WORKER, _handle_command_steals),
    (
        "xdist.workermanage.parse_tx_spec_config(config) (the workers per endpoint, for --concurrency)",
        "the --concurrency start-up check in plugin/hosts.py",
        lambda: _params(getattr(xdist.workermanage, "parse_tx_spec_config", lambda: None)) == ["config"],
    ),
    (
        "WorkerInteractor.steal(indices), sendevent(name, **kwargs)",
        WORKER,
        lambda: (
            _params(WorkerInteractor.steal) == ["self", "indices"]
            and _params(WorkerInteractor.sendevent) == ["self", "name", "kwargs"]
        ),
    ),
    (
        "WorkerInteractor.torun (a TestQueue), nextitem_index, session",
        WORKER,
        lambda: (
            _source_has(WorkerInteractor.__init__, "self.torun = TestQueue(")
            and _source_has(WorkerInteractor.pytest_runtestloop, "self.nextitem_index = self.torun.get()")
            and _source_has(WorkerInteractor.pytest_sessionstart, "self.session = session")
        ),
    ),
    ("TestQueue.lock() and TestQueue.replace(items)", WORKER, _test_queue_is_lockable_and_replaceable),
]


def _message(internal: str, who: str) -> str:
    return f"pytest-xdist {xdist.__version__} changed {internal}: {who} needs updating"


@pytest.mark.parametrize(
    ("internal", "who", "check"), CHECKS, ids=[c[0].split("(")[0].split(" ")[0] for c in CHECKS]
)
def test_an_xdist_internal_the_work_stealing_uses_is_unchanged(
    internal: str, who: str, check: Callable[[], bool]
) -> None:
    try:
        unchanged = check()
    except Exception as exc:  # noqa: BLE001 - gone or renamed: the same message, with why
        pytest.fail(f"{_message(internal, who)} ({type(exc).__name__}: {exc})", pytrace=False)
    assert unchanged, _message(internal, who)


def test_the_scheduler_s_state_is_as_the_subclass_reads_it(pytester: pytest.Pytester) -> None:
    state = _scheduler_state(pytester)
    expected = {
        "numnodes": 2,
        "node2pending": {},
        "node2collection": {},
        "pending": [],
        "steal_requested_from_node": None,
    }
    changed = sorted(name for name in expected if state[name] != expected[name])
    assert not changed, _message(f"WorkStealingScheduling's state {changed}", SCHEDULER)
