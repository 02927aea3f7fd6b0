"""Markers registered at start-up, so `-m` and `--strict-markers` work for every suite."""

from __future__ import annotations

BFCL_CATEGORIES = (
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "live_irrelevance",
    "live_relevance",
)

MARKERS: dict[str, str] = {
    "aime25": "AIME 2025 problems",
    "bfcl": "BFCL items",
    **{category: f"BFCL category {category}" for category in BFCL_CATEGORIES},
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
}
