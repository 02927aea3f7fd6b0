"""The controller side of paid-once work stealing, driven event by event: a refused
steal waits for the refusing worker's next finished item, and never deadlocks a worker
that is on its last item (which finishes only once it is told there is no more). A
worker starts on its share as soon as it has collected, without waiting for the others
(issue 14: start-up to the first request); end to end under -n 2 at the bottom."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from pytest_agenteval.plugin.steal_scheduler import PaidOnceStealing
from tests.conftest import forget_the_xdist_worker, write_jsonl


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


@pytest.mark.parametrize(
    ("items", "first", "then"),
    [
        (12, range(6), (range(6), range(6, 12))),  # pending // numnodes, the rest to b
        (13, range(6), (range(6), range(6, 13))),
        (3, range(1), (range(2), range(2, 3))),  # a, idle on its last item, shares the rest
        (1, range(1), (range(1), range(0))),  # at least one item
    ],
)
def test_the_first_collection_is_sent_its_share_and_the_next_one_the_rest(
    pytester: pytest.Pytester, items: int, first: range, then: tuple[range, range]
) -> None:
    sched, a, b = scheduler(pytester, items, collected=1)
    # b has not collected: sent nothing, and nobody shut down while b's share waits for it
    assert (a.sent, b.sent) == (list(first), [])
    assert not a.shutting_down and not b.shutting_down and not a.steals
    collect(sched, b, ids(items))
    assert (a.sent, b.sent) == tuple(map(list, then))


def test_an_idle_worker_waits_for_the_share_of_one_still_collecting(pytester: pytest.Pytester) -> None:
    sched, a, b = scheduler(pytester, 12, collected=1)
    for index in range(5):  # a is on its last item, nothing to steal from anyone
        finish(sched, a, index)
    assert not a.shutting_down and not sched.tests_finished
    collect(sched, b, ids(12))  # the rest, shared among the idle ones
    assert (a.sent, b.sent) == ([*range(6), 6, 7, 8], [9, 10, 11])


@pytest.mark.parametrize("a_ran", [0, 5], ids=["a-busy", "a-on-its-last-item"])
def test_a_worker_gone_before_collecting_releases_its_share(pytester: pytest.Pytester, a_ran: int) -> None:
    sched, a, b = scheduler(pytester, 12, collected=1)
    for index in range(a_ran):
        finish(sched, a, index)
    assert sched.remove_node(b) is None  # type: ignore[arg-type]
    for index in range(a_ran, 12):
        finish(sched, a, index)
    assert a.sent == list(range(12)) and b.sent == []
    assert a.shutting_down and sched.tests_finished


@pytest.mark.parametrize(
    "theirs",
    [ids(11), [*ids(12), "extra"], [*ids(12)[1:], "t0"]],
    ids=["missing", "extra", "reordered"],
)
def test_a_differing_collection_is_reported_and_its_worker_shut_down(
    pytester: pytest.Pytester, theirs: list[str]
) -> None:
    reports: list[pytest.CollectReport] = []

    class Recorder:
        def pytest_collectreport(self, report: pytest.CollectReport) -> None:
            reports.append(report)

    sched, a, b = scheduler(pytester, 12, collected=1)
    sched.config.pluginmanager.register(Recorder())
    collect(sched, b, theirs)
    (report,) = reports
    assert report.failed and report.nodeid == "b"
    assert str(report.longrepr).startswith("Different tests were collected between a and b.")
    assert b.shutting_down and b.sent == [] and not a.shutting_down
    for index in range(12):  # all of them on a, the run then ends
        finish(sched, a, index)
    assert a.sent == list(range(12)) and b.sent == []
    assert a.shutting_down and sched.tests_finished


@pytest.mark.parametrize("a_collected", [True, False], ids=["a-crashed-running", "a-crashed-collecting"])
def test_a_crashed_worker_s_replacement_is_awaited_too(pytester: pytest.Pytester, a_collected: bool) -> None:
    """xdist replaces a crashed worker (a new node through add_node): the replacement's
    collection must not stand in for b's, which is still to be compared."""
    sched, a, b = scheduler(pytester, 6, collected=1 if a_collected else 0)
    crashed = sched.remove_node(a)  # type: ignore[arg-type]  # the item it crashed on, not run again
    replacement = FakeNode("a2")
    sched.add_node(replacement)  # type: ignore[arg-type]
    collect(sched, replacement, ids(6))
    for index in list(replacement.sent):
        finish(sched, replacement, index)
    assert not sched.tests_finished and not b.shutting_down  # b has not collected
    collect(sched, b, ids(6))
    assert crashed == ("t0" if a_collected else None)
    assert sorted(replacement.sent + b.sent) == list(range(1 if a_collected else 0, 6))


def _none(sched: Any, a: FakeNode, b: FakeNode) -> None:
    pass


def _a_runs(*indices: int) -> Callable[[Any, FakeNode, FakeNode], None]:
    def run(sched: Any, a: FakeNode, b: FakeNode) -> None:
        for index in indices:
            finish(sched, a, index)

    return run


def _b_gone(sched: Any, a: FakeNode, b: FakeNode) -> None:
    sched.remove_node(b)


@pytest.mark.parametrize(
    ("items", "collected", "then", "finished"),
    [
        (12, 0, _none, False),  # nothing collected yet
        (12, 1, _none, False),  # b's share waits for b
        (12, 1, _a_runs(*range(5)), False),  # a is on its last item, b's share still waits
        (12, 1, _b_gone, False),  # b's share goes to a
        (1, 1, _none, False),  # the one item is on a: b's collection is still to be compared
        (0, 1, _none, False),
        (1, 1, _b_gone, True),  # nothing left to wait for
        (12, 2, _none, False),
    ],
    ids=[
        "none-collected",
        "b-collecting",
        "a-ran-its-share",
        "b-gone",
        "one-item",
        "no-items",
        "one-item-b-gone",
        "both",
    ],
)
def test_tests_finished(
    pytester: pytest.Pytester,
    items: int,
    collected: int,
    then: Callable[[Any, FakeNode, FakeNode], None],
    finished: bool,
) -> None:
    sched, a, b = scheduler(pytester, items, collected)
    then(sched, a, b)
    assert sched.tests_finished is finished


# -- end to end: plain test functions, which the scheduler runs as it runs evaluations --

RECORDING = """
import os, time
from pathlib import Path

import pytest

LOG = Path(__file__).with_name("ran.log")


UNTIL_GW0_RAN = {until_gw0_ran}  # False: gw1 is 1.5 s late whatever gw0 does


def gw0_ran() -> bool:
    return UNTIL_GW0_RAN and LOG.exists() and " gw0 " in LOG.read_text()


@pytest.hookimpl(tryfirst=True)  # before xdist reports the collection to the controller
def pytest_collection_finish(session):
    if os.environ.get("PYTEST_XDIST_WORKER") == "gw1":
        # late: until gw0 has run a test (a scheduler waiting for gw1 keeps it from ever
        # doing so: then 10 s, and gw0 starts after gw1 collected); a busy machine slow to
        # start gw0 no longer makes gw1's collection the first (a fixed 1.5 s did)
        deadline = time.monotonic() + (10 if UNTIL_GW0_RAN else 1.5)
        while time.monotonic() < deadline and not gw0_ran():
            time.sleep(0.01)
        Path(__file__).with_name("gw1-collected").write_text(repr(time.time()))


@pytest.fixture(autouse=True)
def _record(request):
    yield
    line = f"{time.time()!r} {os.environ['PYTEST_XDIST_WORKER']} {request.node.nodeid}\\n"
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, line.encode())
    os.close(fd)
"""


def recording(until_gw0_ran: bool) -> str:
    return RECORDING.replace("{until_gw0_ran}", repr(until_gw0_ran))


DIFFERING = """
def pytest_collection_modifyitems(items):
    if os.environ.get("PYTEST_XDIST_WORKER") == "gw1":
        del items[-1]
"""

PLAIN = (
    "import pytest, time\n@pytest.mark.parametrize('i', range(8))\ndef test_one(i):\n    time.sleep(0.05)\n"
)
NODEIDS = [f"test_plain.py::test_one[{i}]" for i in range(8)]


@pytest.fixture(autouse=True)
def _not_a_worker_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs' controller is this process (its workers are processes of their own): when
    this test runs in an xdist worker itself, the conftest must not take it for one."""
    forget_the_xdist_worker(monkeypatch)


def run_plain(pytester: pytest.Pytester, conftest: str, *args: str) -> pytest.RunResult:
    """Eight plain tests under -n 2 in an evaluation run (a replay model), so that xdist
    schedules them with PaidOnceStealing; the controller in this process."""
    pytester.makeconftest(conftest)
    pytester.makepyfile(test_plain=PLAIN)
    replay = write_jsonl(pytester.path / "replay.jsonl", [{"problem_id": 0, "sample_index": 0, "text": "x"}])
    return pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "-n", "2", *args, f"--model-path=replay:{replay}"
    )


def run_two_workers(
    pytester: pytest.Pytester, conftest: str
) -> tuple[pytest.RunResult, list[tuple[float, str, str]]]:
    """`run_plain`; returns the result and the (time, worker, node id) of every test run."""
    result = run_plain(pytester, conftest, "-v")
    result.stdout.fnmatch_lines(["*scheduling tests via PaidOnceStealing*"])
    lines = (pytester.path / "ran.log").read_text().splitlines()
    ran = [(float(t), worker, nodeid) for t, worker, nodeid in (line.split(" ", 2) for line in lines)]
    return result, ran


def test_a_worker_starts_before_a_slow_one_has_collected(pytester: pytest.Pytester) -> None:
    result, ran = run_two_workers(pytester, recording(until_gw0_ran=True))
    assert result.ret == 0
    assert Counter(nodeid for _, _, nodeid in ran) == Counter(NODEIDS)
    gw1_collected = float((pytester.path / "gw1-collected").read_text())
    assert min(t for t, worker, _ in ran if worker == "gw0") < gw1_collected


def test_a_worker_that_collects_differently_is_reported_and_sent_nothing(pytester: pytest.Pytester) -> None:
    # gw1, late, collects 7
    result, ran = run_two_workers(pytester, recording(until_gw0_ran=True) + DIFFERING)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=8, errors=1)
    result.stdout.fnmatch_lines(
        ["Different tests were collected between gw0 and gw1. *", "--- gw0", "", "+++ gw1"]
    )
    # the diff, once in the errors section (the short summary repeats it in full where
    # pytest sees a CI environment, and cuts it to one line elsewhere)
    errors = result.stdout.str().split("short test summary info")[0]
    assert errors.count("+++ gw1") == 1
    assert sorted((worker, nodeid) for _, worker, nodeid in ran) == [("gw0", n) for n in sorted(NODEIDS)]


GW0_COLLECTS = """
def pytest_collection_modifyitems(items):
    if os.environ.get("PYTEST_XDIST_WORKER") == "gw0":
        del items[{keep}:]
"""


@pytest.mark.parametrize("keep", [1, 0], ids=["gw0-collects-1", "gw0-collects-0"])
def test_a_differing_later_collection_is_reported_when_the_first_is_used_up(
    pytester: pytest.Pytester, keep: int
) -> None:
    """gw0 (fast) collects `keep` of the 8 items, gw1 (slow) all 8. gw0 runs out of work
    before gw1 has collected; the run must still wait for gw1's collection and report the
    difference (it used to end there: exit 0 with 7 items never run, or exit 5)."""
    # gw1 the full 1.5 s late: gw0's work must be used up, and reported so, before it collects
    result = run_plain(pytester, recording(until_gw0_ran=False) + GW0_COLLECTS.format(keep=keep))
    log = pytester.path / "ran.log"
    ran = (
        Counter(line.split(" ", 2)[2] for line in log.read_text().splitlines()) if log.exists() else Counter()
    )
    assert ran == Counter(NODEIDS[:keep])
    result.stdout.fnmatch_lines(["*Different tests were collected between gw0 and gw1*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
