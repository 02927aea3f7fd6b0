"""This project's own test run: every test folder has its place in the order the modules go
out to the xdist workers (tests/conftest.py FOLDER_ORDER), and loadscope's own reordering
(most tests first) is off, so that order is the one the workers get."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FOLDER_ORDER, pytest_xdist_make_scheduler

TESTS = Path(__file__).resolve().parents[1]


def test_every_folder_of_test_modules_is_in_the_order() -> None:
    folders = {path.relative_to(TESTS).parts[0] for path in TESTS.glob("*/**/test_*.py")}
    assert sorted(folders - set(FOLDER_ORDER)) == []
    assert sorted(set(FOLDER_ORDER) - folders) == []  # no stale name
    assert len(set(FOLDER_ORDER)) == len(FOLDER_ORDER)


def test_the_scheduler_keeps_the_collection_order() -> None:
    pytest.importorskip("xdist")

    class Option:
        dist = "load"
        loadscopereorder = True
        tx = ["2*popen"]

    class Config:
        option = Option()
        args = ["tests"]

        def getvalue(self, name: str) -> object:
            return getattr(self.option, name)

    config = Config()
    scheduler = pytest_xdist_make_scheduler(config, log=None)  # type: ignore[arg-type]
    assert type(scheduler).__name__ == "LoadScopeScheduling"
    assert config.option.loadscopereorder is False
