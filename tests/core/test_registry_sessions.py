"""A second pytest session in one process (pytest.main called again, pytester's in-process
runs) summarises with its own suite objects: the registry of suites seen during collection
starts empty at every session (`forget_suites` at pytest_configure)."""

from __future__ import annotations

import pytest

from pytest_agenteval.api.suite import Suite
from pytest_agenteval.tasks import registry
from pytest_agenteval.tasks.aime25 import Aime25


def test_forget_suites_drops_what_an_earlier_session_remembered() -> None:
    registry.forget_suites()  # what an earlier in-process run of this worker remembered
    mine = Suite()
    mine.name = "aime25"  # a user's subclass that keeps the built-in's name
    registry.remember(mine)
    assert registry.suite_by_name("aime25") is mine
    registry.forget_suites()
    assert type(registry.suite_by_name("aime25")) is Aime25


def test_a_new_session_in_the_same_process_does_not_see_the_last_ones_suites(
    pytester: pytest.Pytester,
) -> None:
    stale = Suite()
    stale.name = "stale-suite"
    registry.remember(stale)
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK
    assert "stale-suite" not in registry._instances
