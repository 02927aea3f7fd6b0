"""Markers registered at start-up, so `-m` and `--strict-markers` work for every suite."""

from __future__ import annotations

# Every official BFCL category (in the leaderboard's order) and its summary group; both
# are markers of the category's items.
BFCL_GROUP: dict[str, str] = {
    "simple_python": "simple",
    "simple_java": "simple",
    "simple_javascript": "simple",
    "multiple": "multiple",
    "parallel": "parallel",
    "parallel_multiple": "parallel_multiple",
    "irrelevance": "irrelevance",
    "live_simple": "simple",
    "live_multiple": "multiple",
    "live_parallel": "parallel",
    "live_parallel_multiple": "parallel_multiple",
    "live_irrelevance": "irrelevance",
    "live_relevance": "relevance",
}
BFCL_CATEGORIES: tuple[str, ...] = tuple(BFCL_GROUP)
# BFCL v4 multi-turn: played step by step in bfcl-eval's executable environments.
BFCL_MULTI_TURN_CATEGORIES: tuple[str, ...] = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
# BFCL v4 agentic: memory (one category per backend) and web search.
BFCL_MEMORY_CATEGORIES: tuple[str, ...] = ("memory_kv", "memory_vector", "memory_rec_sum")
BFCL_WEB_SEARCH_CATEGORIES: tuple[str, ...] = ("web_search_base", "web_search_no_snippet")
BFCL_AGENTIC_CATEGORIES: tuple[str, ...] = BFCL_WEB_SEARCH_CATEGORIES + BFCL_MEMORY_CATEGORIES
BFCL_ALL_CATEGORIES: tuple[str, ...] = (
    BFCL_CATEGORIES + BFCL_MULTI_TURN_CATEGORIES + BFCL_AGENTIC_CATEGORIES + ("format_sensitivity",)
)

MARKERS: dict[str, str] = {
    "aime25": "AIME 2025 problems",
    "bfcl": "BFCL items",
    **{category: f"BFCL category {category}" for category in BFCL_ALL_CATEGORIES},
    "multi_turn": "BFCL multi-turn categories",
    "agentic": "BFCL agentic categories (memory and web search)",
    "memory": "BFCL memory categories",
    "web_search": "BFCL web search categories",
    "simple": "BFCL simple calls (python, java, javascript, live_simple)",
    "relevance": "BFCL live_relevance",
    "live": "BFCL live categories",
    "non_live": "BFCL non-live categories",
    "python": "BFCL python items",
    "java": "BFCL java items",
    "javascript": "BFCL javascript items",
    "gaia": "GAIA tasks",
    "level1": "GAIA level 1",
    "level2": "GAIA level 2",
    "level3": "GAIA level 3",
    "datagen": "generated problems (datagen suite)",
    "algebra": "datagen topic algebra",
    "geometry": "datagen topic geometry",
    "number_theory": "datagen topic number theory",
    "combinatorics": "datagen topic combinatorics",
    "probability": "datagen topic probability",
    "other_topic": "datagen problems of any other topic",
}
