"""Quiet by default: a user's run prints no third-party warning that is not about it."""

from __future__ import annotations

import pytest

# pytest-asyncio (a dependency) warns on every process of a run whose ini leaves its fixture
# loop scope unset: 4 lines, once per xdist worker, before anything of the user's run. The
# plugin's own loops are its engine's, not pytest-asyncio's; an async test of the user's gets
# "function", pytest-asyncio's announced default. A value the user's ini or `-o` sets stays.
ASYNCIO_LOOP_SCOPE = "asyncio_default_fixture_loop_scope"


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    if not early_config.pluginmanager.hasplugin("asyncio"):
        return
    try:
        unset = not early_config.getini(ASYNCIO_LOOP_SCOPE)
    except ValueError:  # pytest-asyncio without that option
        return
    if unset:
        early_config._inicache[ASYNCIO_LOOP_SCOPE] = "function"  # what -o would set (pytest 8, 9)
