"""A module fixture for the test files whose sessions score BFCL items in this process: at
the module's end, the entries the suite parsed once for the process (`all_entries`) still
equal a fresh parse, so no session changed what the next one reads."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_agenteval.tasks.bfcl._data import CATEGORIES, BfclDataError, find_data_dir, load_bfcl
from pytest_agenteval.tasks.bfcl._executable import load_executable
from pytest_agenteval.tasks.bfcl._format_sensitivity import load_format_sensitivity
from pytest_agenteval.tasks.bfcl.suite import _LOADED, all_entries


def fresh_entries(data_dir: Path | None = None) -> list:
    root = find_data_dir(data_dir)
    return [*load_bfcl(CATEGORIES, root), *load_executable(root), *load_format_sensitivity(root)]


@pytest.fixture(scope="module", autouse=True)
def bfcl_entries_untouched() -> Iterator[None]:
    yield
    all_entries(None)  # the installed data's, parsed if no session did
    for (folder, _), entries in list(_LOADED.items()):  # and every other folder's a session read
        assert_untouched(entries, Path(folder))


def assert_untouched(shared: list, data_dir: Path | None) -> None:
    changed = [a.id for a, b in zip(shared, fresh_entries(data_dir), strict=True) if a != b]
    assert changed == [], f"a session changed the shared BFCL entries {changed[:5]}"


@pytest.fixture(scope="module", autouse=True)
def bfcl_entries_frozen() -> None:
    """The process's BFCL entries parsed once at the module's start and moved out of the
    garbage collector's sight (`gc.freeze`, as tests/conftest.py's `_freeze_the_heap` does
    for what earlier modules left): the full collections of each in-process BFCL run (pytest
    makes two at its end) then skip the 10,306 parsed entries, about half of such a run's CPU."""
    with contextlib.suppress(BfclDataError):  # no bfcl-eval: the module's oracle tests say so
        all_entries(None)
    gc.collect()
    gc.freeze()
