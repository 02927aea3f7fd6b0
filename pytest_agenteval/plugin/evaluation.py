"""What an evaluation item's test body sees (`Evaluation`), the failure its `check()`
raises when no generation is correct (`Unsolved`), and how that failure reads when a gate
decides the run (xfailed: docs/ci.md)."""

from __future__ import annotations

import pytest

from pytest_agenteval.api.records import ProblemRecord
from pytest_agenteval.api.suite import Suite


class Unsolved(pytest.fail.Exception):
    """The failure of `Evaluation.check`: the item's generations were scored and none is
    correct. It reads as pytest's own `Failed`; the report says it is an unsolved item."""

    # Named as pytest's own Failed so that the line the terminal and JUnit show
    # (`Failed: 0/4 correct; ...`) stays what it was; the type tells the controller apart.
    __module__ = "builtins"
    __qualname__ = "Failed"


class Evaluation:
    """What the test body sees: the scored record of its N generations."""

    def __init__(self, record: ProblemRecord, suite: Suite) -> None:
        self.record = record
        self.suite = suite

    @property
    def passed(self) -> bool:
        return self.suite.item_passed(self.record)

    def check(self) -> None:
        """An item passes when at least one of its N generations is correct."""
        if not self.passed:
            __tracebackhide__ = True
            raise Unsolved(self.suite.failure_message(self.record), pytrace=False)


def xfail_unsolved(report: pytest.TestReport, unsolved: Unsolved) -> None:
    """When a gate (or a baseline) decides the run, an unsolved item is an expected outcome:
    pytest's xfail (`x`, JUnit `<skipped type="pytest.xfail">`, its counts in its JUnit
    properties), so the terminal, JUnit and the exit status agree (docs/ci.md)."""
    report.outcome, report.longrepr = "skipped", None
    report.wasxfail = f"unsolved, a gate decides the run: {unsolved.msg}"
