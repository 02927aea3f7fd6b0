"""Which selections --batch refuses, and the one line it says (pure logic, table-driven)."""

from __future__ import annotations

import pytest

from pytest_agenteval.api.records import Problem
from pytest_agenteval.plugin.batching import refusal
from pytest_agenteval.tasks.aime25 import Aime25
from pytest_agenteval.tasks.bfcl._agentic_data import AgenticEntry
from pytest_agenteval.tasks.bfcl._mt_data import MultiTurnEntry
from pytest_agenteval.tasks.bfcl.suite import Bfcl
from pytest_agenteval.tasks.datagen.suite import Datagen
from pytest_agenteval.tasks.gaia.suite import Gaia

AIME = (Aime25(), Problem("aime25", 0, 0, "?", "1"))
GAIA = (Gaia(), Problem("gaia", "t1", 0, "?", "x"))
DATAGEN = (Datagen(), Problem("datagen", "g1", 0, "?", "1"))
SIMPLE = (Bfcl(), Problem("bfcl", "simple_python_0", 0, "?", None, payload=object()))
MULTI = (
    Bfcl(),
    Problem(
        "bfcl",
        "multi_turn_base_0",
        0,
        "?",
        None,
        payload=MultiTurnEntry("m", "multi_turn_base", [], [], {}, {}, [], []),
    ),
)
MEMORY = (
    Bfcl(),
    Problem(
        "bfcl",
        "memory_kv_0",
        0,
        "?",
        None,
        payload=AgenticEntry("a", "memory_kv", [], [], "MemoryAPI_kv", []),
    ),
)
HEAD = "--batch sends single-turn requests only, and "


@pytest.mark.parametrize(
    ("selected", "mode", "line"),
    [
        ([AIME, SIMPLE, DATAGEN], "text-only", None),
        ([], "retool", None),
        (
            [AIME],
            "retool",
            HEAD + "aime25 in retool mode is multi-turn: pass --mode text-only for AIME, or drop --batch",
        ),
        ([GAIA], "text-only", HEAD + "gaia (an agent) is multi-turn: deselect GAIA, or drop --batch"),
        (
            [SIMPLE, MULTI, MULTI, MEMORY],
            "text-only",
            HEAD
            + "bfcl category multi_turn_base, bfcl category memory_kv are multi-turn: select single-turn "
            "BFCL categories (e.g. -m 'not multi_turn and not agentic'), or drop --batch",
        ),
        (
            [AIME, MULTI, GAIA],
            "retool",
            HEAD + "aime25 in retool mode, bfcl category multi_turn_base, gaia (an agent) are multi-turn: "
            "pass --mode text-only for AIME; select single-turn BFCL categories (e.g. -m 'not multi_turn "
            "and not agentic'); deselect GAIA, or drop --batch",
        ),
    ],
)
def test_refusal(selected: list, mode: str, line: str | None) -> None:
    assert refusal(selected, mode) == line
