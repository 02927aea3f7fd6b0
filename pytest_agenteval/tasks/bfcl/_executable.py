"""The BFCL categories played in bfcl-eval's executable environments (multi-turn, memory,
web search), as the suite sees them: loading, why an item must skip, rollout, score."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_agenteval.api.records import Rollout, Score, sample_seed
from pytest_agenteval.tasks.bfcl._agentic import play_agentic, score_agentic
from pytest_agenteval.tasks.bfcl._agentic_data import AgenticEntry, load_agentic
from pytest_agenteval.tasks.bfcl._mt_data import MultiTurnEntry, load_multi_turn
from pytest_agenteval.tasks.bfcl._mt_env import missing_requirements, use_search_backend
from pytest_agenteval.tasks.bfcl._mt_rollout import play_multi_turn
from pytest_agenteval.tasks.bfcl._mt_score import score_multi_turn
from pytest_agenteval.tasks.markers import (
    BFCL_MEMORY_CATEGORIES,
    BFCL_MULTI_TURN_CATEGORIES,
    BFCL_WEB_SEARCH_CATEGORIES,
)

if TYPE_CHECKING:
    from pytest_agenteval.api.suite import RolloutContext
    from pytest_agenteval.config.options import Settings

ExecutableEntry = MultiTurnEntry | AgenticEntry
VECTOR_SKIP = (
    "memory_vector needs sentence-transformers, faiss-cpu and the all-MiniLM-L6-v2 embedding model, "
    "which bfcl-eval loads from the Hugging Face hub at import; this version does not run it"
)
SEARCH_SKIP = (
    "web search needs a search backend: pass --bfcl-search-backend URL (a SerpAPI-compatible server) "
    "or set SERPAPI_API_KEY for the official SerpAPI (internet)"
)


def load_executable(root: Path) -> list[ExecutableEntry]:
    entries: list[ExecutableEntry] = []
    for category in BFCL_MULTI_TURN_CATEGORIES:
        entries.extend(load_multi_turn(root, category))
    for category in BFCL_WEB_SEARCH_CATEGORIES + BFCL_MEMORY_CATEGORIES:
        entries.extend(load_agentic(root, category))
    return entries


def skip_reason(entry: ExecutableEntry, settings: Settings) -> str | None:
    """One line saying why ``entry`` cannot run here and what to pass, or ``None``."""
    if isinstance(entry, AgenticEntry) and entry.category == "memory_vector":
        return VECTOR_SKIP
    if isinstance(entry, AgenticEntry) and entry.scenario is None and not _search_backend(settings):
        return SEARCH_SKIP
    environment = entry.environment if isinstance(entry, AgenticEntry) else None
    missing = missing_requirements(environment)
    if missing:
        return f"BFCL {entry.category} needs bfcl-eval's environments: pip install {' '.join(missing)}"
    return None


def _search_backend(settings: Settings) -> str | None:
    return settings.bfcl_search_backend or (
        "https://serpapi.com" if os.environ.get("SERPAPI_API_KEY") else None
    )


async def play(entry: ExecutableEntry, ctx: RolloutContext, native: bool) -> Rollout:
    if isinstance(entry, MultiTurnEntry):
        return await play_multi_turn(entry, ctx.sampler, ctx.params(), native)
    chain_seed = sample_seed(ctx.settings.seed, f"{entry.category}:{entry.scenario}:prereq", ctx.sample_index)
    config: dict[str, Any] = {}
    if entry.scenario is None:  # web search
        use_search_backend(_search_backend(ctx.settings) or "")
        config = {"show_snippet": "no_snippet" not in entry.category}
    return await play_agentic(
        entry, ctx.sampler, ctx.params(), ctx.params(seed=chain_seed), native, ctx.sample_index, config
    )


def score(entry: ExecutableEntry, rollout: Rollout, native: bool) -> Score:
    turns = rollout.extra.get("mt_turns") or []
    error = rollout.extra.get("inference_error")
    if error:
        return inference_error_score(entry, error)
    if isinstance(entry, MultiTurnEntry):
        return score_multi_turn(entry, turns, native)
    return score_agentic(entry, turns, native)


def inference_error_score(entry: ExecutableEntry, error: str) -> Score:
    """What the official evaluator gives an entry whose result is an error text."""
    kind = "multi_turn" if isinstance(entry, MultiTurnEntry) else "agentic"
    return Score(
        correct=False,
        formatted=False,
        fields={
            "valid": False,
            "lenient_valid": False,
            "error_type": f"{kind}:inference_error",
            "error_message": error,
            "decode_error": None,
            "predicted_call": False,
            "expected_call": True,
            "params_total": 0,
            "params_correct": 0,
        },
    )
