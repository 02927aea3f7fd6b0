"""Write the official BFCL result files so ``bfcl evaluate`` can re-score a run.

Layout of bfcl-eval 2026.3.23 (``BaseHandler.write``)::

    <root>/<model name, "/" -> "_">/<non_live|live|multi_turn>/BFCL_v4_<category>_result.json

one ``{"id": ..., "result": ...}`` JSON object per line, sorted by entry index.
``result`` is the raw model text for prompting models, or the list of
``{tool name: arguments JSON string}`` for function-calling models; for a
multi-turn entry it is the list of turns, each the list of the steps' results.
Re-score
with ``bfcl evaluate --model <model name> --test-category <categories>
--result-dir <absolute root>`` (add ``--partial-eval`` when only some ids ran);
``<model name>`` must be registered in bfcl-eval ("Invalid model name" otherwise)
with a handler of the same inference style (a prompting model for raw text, an
FC model for tool calls). The name only picks bfcl-eval's decoder and its
function-name rule; ``DEFAULT_EXPORT_MODELS`` are registered models whose
handlers decode exactly what our two styles produce.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_agenteval.tasks.bfcl._data import ALL_CATEGORIES, MULTI_TURN_CATEGORIES, VERSION_PREFIX
from pytest_agenteval.tasks.markers import BFCL_AGENTIC_CATEGORIES

# Listed in bfcl-eval 2026.3.23, and usable by `bfcl evaluate` without any API key (its
# MistralHandler builds its client without one; OpenAI's handler refuses to start
# without OPENAI_API_KEY, even to evaluate). The prompting entry decodes `[f(a=1)]` with
# the default prompting decoder; the FC entry reads `[{name: arguments JSON}]` with dots
# in names sent as underscores (`underscore_to_dot`), as our native style sends them.
DEFAULT_EXPORT_MODELS = {"prompting": "open-mistral-nemo-2407", "native": "open-mistral-nemo-2407-FC"}


def export_model_name(style: str, chosen: str | None = None) -> str:
    """The model folder of an export: the user's choice, else the default of the style."""
    return chosen or DEFAULT_EXPORT_MODELS[style]


def check_export_model(name: str, style: str) -> None:
    """Raise ValueError (one line) for a name `bfcl evaluate` would refuse or misread."""
    try:
        from bfcl_eval.constants.supported_models import SUPPORTED_MODELS  # a plain list, no SDKs
    except ImportError:
        return  # bfcl-eval not installed: nothing to check against
    if name not in SUPPORTED_MODELS:
        raise ValueError(
            f"--bfcl-export-model {name!r}: bfcl evaluate refuses it (not a model bfcl-eval lists); "
            f"pick one from bfcl_eval.constants.supported_models, e.g. {DEFAULT_EXPORT_MODELS[style]!r}"
        )
    if name.endswith("-FC") != (style == "native"):
        wanted = "an FC model (name ending in -FC)" if style == "native" else "a prompting model (no -FC)"
        raise ValueError(
            f"--bfcl-export-model {name!r} does not match --bfcl-style {style}: "
            f"bfcl evaluate would decode the outputs wrongly; pick {wanted}"
        )


def evaluate_command(root: str | Path, model_name: str, categories: Iterable[str], partial: bool) -> str:
    """The official command that re-scores an export, as a user types it."""
    command = (
        f"bfcl evaluate --model {model_name} --test-category {','.join(categories)} "
        f"--result-dir {Path(root).resolve()} --score-dir {Path(root).resolve() / 'score'}"
    )
    return command + (" --partial-eval" if partial else "")


def result_path(root: str | Path, model_name: str, category: str) -> Path:
    """Where the official runner looks for ``category``'s results of ``model_name``."""
    if category in MULTI_TURN_CATEGORIES:
        group = "multi_turn"
    elif category.startswith("memory_"):
        group = f"agentic/memory/{category.removeprefix('memory_')}"
    elif category in BFCL_AGENTIC_CATEGORIES:
        group = "agentic"
    elif category == "format_sensitivity":
        group = "format_sensitivity"
    else:
        group = "live" if category.startswith("live") else "non_live"
    file_name = f"{VERSION_PREFIX}_{category}_result.json"
    return Path(root) / model_name.replace("/", "_") / group / file_name


def export_official_results(
    items: Iterable[tuple[str, str, Any]], root: str | Path, model_name: str
) -> list[Path]:
    """Write one result file per category present in ``items`` (id, category, raw result).

    Existing files for those categories are replaced. Returns the paths written,
    in ``ALL_CATEGORIES`` order.
    """
    by_category: dict[str, dict[str, Any]] = {}
    for entry_id, category, result in items:
        if category not in ALL_CATEGORIES:
            raise ValueError(f"unknown BFCL category {category!r} for {entry_id}")
        # The official runner reads the category back from the id.
        if _base_id(entry_id).rsplit("_", 1)[0] != category:
            raise ValueError(f"id {entry_id!r} does not belong to category {category!r}")
        results = by_category.setdefault(category, {})
        if entry_id in results:
            raise ValueError(f"duplicate result for {entry_id}")
        results[entry_id] = result
    written = []
    for category in ALL_CATEGORIES:
        if category in by_category:
            path = result_path(root, model_name, category)
            _write_lines(path, sorted(by_category[category].items(), key=_index_key))
            written.append(path)
    return written


def _index_key(item: tuple[str, Any]) -> int:
    # `live_simple_19-3-15` sorts by 19, `simple_python_7` by 7, as officially.
    return int(_base_id(item[0]).rsplit("_", 1)[1].split("-")[0])


def _base_id(entry_id: str) -> str:
    # Format sensitivity ids are `format_sensitivity_<n>:<config>:<entry id>`.
    return entry_id.split(":")[0]


def _write_lines(path: Path, entries: list[tuple[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with partial.open("w", encoding="utf-8") as handle:
        for entry_id, result in entries:
            handle.write(json.dumps({"id": entry_id, "result": result}) + "\n")
    os.replace(partial, path)
