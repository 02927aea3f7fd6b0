"""Load the official BFCL v4 multi-turn entries (base, miss_func, miss_param, long_context).

A multi-turn entry has no function docs of its own: they are the docs of its
``involved_classes`` (``data/multi_turn_func_doc/``), as the official
``populate_test_cases_with_predefined_functions`` builds them. In miss_func
entries the ``missed_function`` docs are held out of that list and handed to
the model at the turn they are announced.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agenteval.tasks.bfcl._data import VERSION_PREFIX, BfclDataError, _read_jsonl
from pytest_agenteval.tasks.markers import BFCL_MULTI_TURN_CATEGORIES as MULTI_TURN_CATEGORIES

# bfcl-eval's MULTI_TURN_FUNC_DOC_FILE_MAPPING (constants/executable_backend_config.py).
FUNC_DOC_FILES: dict[str, str] = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
}


@dataclass(frozen=True)
class MultiTurnEntry:
    """One multi-turn problem, as the official runner sees it after loading.

    ``question``: the user messages of each turn (an empty turn is where held-out
    functions arrive). ``functions``: the docs available from the start.
    ``missed_functions``: turn index -> docs added at that turn. ``ground_truth``:
    the official call strings of each turn.
    """

    id: str
    category: str
    question: list[list[dict[str, Any]]]
    functions: list[dict[str, Any]]
    missed_functions: dict[int, list[dict[str, Any]]]
    initial_config: dict[str, Any]
    involved_classes: list[str]
    ground_truth: list[list[str]]
    language: str = "python"

    @property
    def long_context(self) -> bool:
        # The official test: "long_context" (or "composite") in the category name.
        return "long_context" in self.category or "composite" in self.category


def load_multi_turn(root: Path, category: str) -> list[MultiTurnEntry]:
    """Entries of one multi-turn category from the data folder ``root``, in file order."""
    if category not in MULTI_TURN_CATEGORIES:
        raise BfclDataError(f"{category} is not a multi-turn category")
    prompts = _read_jsonl(root / f"{VERSION_PREFIX}_{category}.json")
    answers = _read_jsonl(root / "possible_answer" / f"{VERSION_PREFIX}_{category}.json")
    if [a.get("id") for a in answers] != [p.get("id") for p in prompts]:
        raise BfclDataError(
            f"{category}: prompt and possible_answer ids differ: re-install bfcl-eval or fix --bfcl-data-dir"
        )
    docs: dict[str, list[dict[str, Any]]] = {}
    entries = []
    for number, (prompt, answer) in enumerate(zip(prompts, answers, strict=True), start=1):
        try:
            entries.append(_entry(root, category, prompt, answer["ground_truth"], docs))
        except KeyError as exc:
            raise BfclDataError(
                f"{category} line {number} lacks field {exc}: re-install bfcl-eval or fix --bfcl-data-dir"
            ) from None
    return entries


def _entry(
    root: Path,
    category: str,
    prompt: dict[str, Any],
    ground_truth: list[list[str]],
    docs: dict[str, list[dict[str, Any]]],
) -> MultiTurnEntry:
    functions: list[dict[str, Any]] = []
    for class_name in prompt["involved_classes"]:
        functions.extend(json.loads(json.dumps(_class_docs(root, class_name, docs))))
    missed: dict[int, list[dict[str, Any]]] = {}
    for turn, names in (prompt.get("missed_function") or {}).items():
        # Official order: each held-out doc leaves the list at its first match.
        missed[int(turn)] = []
        for name in names:
            index = next((i for i, doc in enumerate(functions) if doc["name"] == name), None)
            if index is not None:
                missed[int(turn)].append(functions.pop(index))
    return MultiTurnEntry(
        id=prompt["id"],
        category=category,
        question=prompt["question"],
        functions=functions,
        missed_functions=missed,
        initial_config=prompt.get("initial_config") or {},
        involved_classes=list(prompt["involved_classes"]),
        ground_truth=ground_truth,
    )


def _class_docs(root: Path, class_name: str, cache: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    if class_name not in cache:
        file_name = FUNC_DOC_FILES.get(class_name)
        if file_name is None:
            raise BfclDataError(f"unknown BFCL environment class {class_name!r}: re-install bfcl-eval")
        cache[class_name] = _read_jsonl(root / "multi_turn_func_doc" / file_name)
    return cache[class_name]
