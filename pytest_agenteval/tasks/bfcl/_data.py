"""Locate and load the official BFCL v4 single-turn data.

The data ships inside the PyPI package ``bfcl-eval`` (``bfcl_eval/data/``). We
find it with ``importlib.util.find_spec`` instead of importing the package:
importing ``bfcl_eval`` pulls in dozens of vendor SDKs.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agenteval.tasks.markers import BFCL_ALL_CATEGORIES as ALL_CATEGORIES  # noqa: F401 - re-exported
from pytest_agenteval.tasks.markers import BFCL_CATEGORIES as CATEGORIES
from pytest_agenteval.tasks.markers import BFCL_GROUP as _GROUP_MARKER
from pytest_agenteval.tasks.markers import BFCL_MEMORY_CATEGORIES, BFCL_WEB_SEARCH_CATEGORIES
from pytest_agenteval.tasks.markers import BFCL_MULTI_TURN_CATEGORIES as MULTI_TURN_CATEGORIES

VERSION_PREFIX = "BFCL_v4"

# Categories scored without a ground truth (no possible_answer file).
NO_GROUND_TRUTH: frozenset[str] = frozenset({"irrelevance", "live_irrelevance", "live_relevance"})

_MISSING_DATA_FIX = "pip install --no-deps bfcl-eval==2026.3.23, or pass --bfcl-data-dir DIR"


class BfclDataError(Exception):
    """The BFCL data is missing or malformed; the message names the fix."""


@dataclass(frozen=True)
class BfclEntry:
    """One BFCL problem, as the official files describe it.

    ``question`` is the raw official list of turns (each a list of chat
    messages); ``ground_truth`` is the possible-answer list, ``None`` for the
    relevance and irrelevance categories.
    """

    id: str
    category: str
    question: list[list[dict[str, Any]]]
    functions: list[dict[str, Any]]
    ground_truth: list[dict[str, Any]] | None
    language: str


def category_language(category: str) -> str:
    """The language the official checker uses for ``category``."""
    if "javascript" in category:
        return "javascript"
    if "java" in category:
        return "java"
    return "python"


def category_markers(category: str) -> tuple[str, ...]:
    """pytest marker names for one category: itself, its group, live/non_live, language
    (multi-turn: itself and ``multi_turn``; agentic: itself, ``memory`` or ``web_search``,
    and ``agentic``)."""
    if category in MULTI_TURN_CATEGORIES:
        return (category, "multi_turn")
    if category in BFCL_MEMORY_CATEGORIES:
        return (category, "memory", "agentic")
    if category in BFCL_WEB_SEARCH_CATEGORIES:
        return (category, "web_search", "agentic")
    if category == "format_sensitivity":
        return (category,)
    _require_known([category])
    markers = [
        category,
        _GROUP_MARKER[category],
        "live" if category.startswith("live_") else "non_live",
        category_language(category),
    ]
    return tuple(dict.fromkeys(markers))


def find_data_dir(data_dir: str | Path | None = None) -> Path:
    """The folder holding ``BFCL_v4_<category>.json`` files.

    A user-given folder wins; otherwise the ``data`` folder of the installed
    ``bfcl_eval`` package, located without importing it.
    """
    if data_dir is not None:
        path = Path(data_dir).expanduser()
        if not path.is_dir():
            raise BfclDataError(
                f"--bfcl-data-dir {path} is not a folder: pass the folder holding "
                f"{VERSION_PREFIX}_<category>.json files"
            )
        return path
    spec = importlib.util.find_spec("bfcl_eval")
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        raise BfclDataError(f"bfcl-eval data not found: {_MISSING_DATA_FIX}")
    path = Path(locations[0]) / "data"
    if not path.is_dir():
        raise BfclDataError(f"bfcl-eval is installed but has no data folder: {_MISSING_DATA_FIX}")
    return path


def load_bfcl(categories: Iterable[str], data_dir: str | Path | None = None) -> list[BfclEntry]:
    """Load the entries of ``categories``, in ``CATEGORIES`` order, official file order within."""
    wanted = set(categories)
    _require_known(wanted)
    root = find_data_dir(data_dir)
    entries: list[BfclEntry] = []
    for category in CATEGORIES:
        if category in wanted:
            entries.extend(_load_category(root, category))
    return entries


def _load_category(root: Path, category: str) -> list[BfclEntry]:
    prompts = _read_jsonl(root / f"{VERSION_PREFIX}_{category}.json")
    answers: list[dict[str, Any]] | None = None
    if category not in NO_GROUND_TRUTH:
        answers = _read_jsonl(root / "possible_answer" / f"{VERSION_PREFIX}_{category}.json")
        if [a.get("id") for a in answers] != [p.get("id") for p in prompts]:
            raise BfclDataError(
                f"{category}: prompt and possible_answer ids differ: "
                "re-install bfcl-eval or fix --bfcl-data-dir"
            )
    language = category_language(category)
    entries = []
    for index, prompt in enumerate(prompts):
        try:
            entries.append(
                BfclEntry(
                    id=prompt["id"],
                    category=category,
                    question=prompt["question"],
                    functions=prompt["function"],
                    ground_truth=answers[index]["ground_truth"] if answers else None,
                    language=language,
                )
            )
        except KeyError as exc:
            raise BfclDataError(
                f"{category} line {index + 1} lacks field {exc}: re-install bfcl-eval or fix --bfcl-data-dir"
            ) from None
    return entries


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise BfclDataError(f"BFCL file {path} not found: {_MISSING_DATA_FIX}")
    records = []
    # One JSON object per line; the official files have no trailing newline.
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise BfclDataError(
                    f"{path} line {number} is not JSON ({exc.msg}): re-install bfcl-eval or fix the file"
                ) from None
    return records


def _require_known(categories: Iterable[str]) -> None:
    unknown = sorted(set(categories) - set(CATEGORIES))
    if unknown:
        raise BfclDataError(
            f"unknown BFCL categories {', '.join(unknown)}: choose from {', '.join(CATEGORIES)}"
        )
