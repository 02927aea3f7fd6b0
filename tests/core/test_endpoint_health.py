"""The circuit breaker and deadline arithmetic of samplers/_health.py, on a fake clock."""

from __future__ import annotations

from pytest_agenteval.models.http.health import TRIP_FAILURES, EndpointHealth


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_endpoint_leaves_the_rotation_after_most_recent_failures_and_returns_through_one_probe() -> None:
    clock = Clock()
    health = EndpointHealth(["a", "b"], clock)
    for _ in range(TRIP_FAILURES - 1):
        health.failed("b")
    assert health.pick({"a": 5, "b": 0}) == ("b", 0.0)  # 13 of 20: still in, least loaded
    health.failed("b")
    assert health.pick({"a": 5, "b": 0}) == ("a", 0.0)  # out: everything goes to a
    assert health.healthy_other_than("b") and not health.healthy_other_than("a")
    health.failed("a")
    assert health.pick({}, avoid="a") == ("a", 0.0)  # avoid only while there is another
    clock.now += 1.0  # b's 1 s cooldown is over, but a is in the rotation: no probe needed
    assert health.pick({"a": 0, "b": 0}) == ("a", 0.0)
    for _ in range(TRIP_FAILURES):
        health.failed("a")
    assert health.all_down_for() == 0.0  # a just went out...
    assert health.pick({}) == ("b", 0.0)  # ...and b's cooldown is over: one half-open probe
    assert health.pick({}) == (None, 1.0)  # a second request waits for a's cooldown
    health.failed("b")  # the probe failed: out again, for twice as long
    clock.now += 1.0
    assert health.pick({}) == ("a", 0.0)  # a's probe
    assert health.pick({}) == (None, 1.0)
    health.succeeded("a")
    assert health.pick({"b": 0}) == ("a", 0.0) and health.all_down_for() == 0.0
    assert health.counts == {"circuit_opened": 3, "circuit_probes": 2, "circuit_closed": 1}


def test_every_endpoint_down_is_timed_from_when_the_last_one_went_out() -> None:
    clock = Clock()
    health = EndpointHealth(["a"], clock)
    for _ in range(TRIP_FAILURES):
        health.failed("a")
    clock.now += 7.5
    assert health.all_down_for() == 7.5
    health.neutral("a")  # a 429 says nothing of health
    assert health.all_down_for() == 7.5


def test_a_deadline_needs_three_throughputs_and_allows_three_times_the_slowest() -> None:
    health = EndpointHealth(["a"])
    health.succeeded("a", 100, 1.0)  # 100 tokens/s
    health.succeeded("a", 50, 1.0)  # 50 tokens/s: the slowest
    assert health.deadline("a", 1000, slack_s=60) is None
    health.succeeded("a", 0, 1.0)  # no tokens: says nothing of throughput
    assert health.deadline("a", 1000, slack_s=60) is None
    health.succeeded("a", 200, 1.0)
    assert health.deadline("a", 1000, slack_s=60) == 60 + 3 * 1000 / 50
