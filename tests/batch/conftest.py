"""Batch-mode helpers: a tiny AIME suite run against the test server, with and without --batch."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SUITE_FILE, TINY_PROBLEMS, read_results, write_jsonl

# Deterministic replies: two problems answered right, two wrong, whatever the seed.
ANSWERS = {
    "30 + 40": "So it is \\boxed{70}.",
    "12 * 49": "So it is \\boxed{588}.",
    "power 4": "So it is \\boxed{15}.",
}
DEFAULT_ANSWER = "I cannot tell."
# What differs between two runs of the same generations (when, how, where they ran).
RUN_FIELDS = {
    "requests",
    "backend",
    "duration_s",
    "started_at",
    "finished_at",
    "config",
    "selection",
    "harness",
    "workers",
    "versions",
    "storage",
    "stalls",
    "model",  # its endpoint: each server has its own port
}


def metrics(summary: dict[str, Any]) -> dict[str, Any]:
    """A summary without what says how the run went: what two runs of the same generations share."""
    return {k: v for k, v in summary.items() if k not in RUN_FIELDS}


def run_against(
    pytester: pytest.Pytester, server: Any, *args: str, cache: str, out: str
) -> tuple[pytest.RunResult, dict[str, Any]]:
    """pytest in this process (no interpreter to start and import: about 0.6 s of CPU a run;
    with -n 2 the workers are subprocesses anyway) with `server` as the model (its batches
    polled every 0.05 s), the cache folder `cache` and the results file `out`; the result and
    the summary ({} if none)."""
    result = pytester.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        f"--endpoint={server.url}",
        "--model-name=mock-model",
        "--model-revision=test",
        f"--agenteval-cache-dir={pytester.path / cache}",
        f"--agenteval-out={pytester.path / out}",
        "--batch-poll-interval=0.05",
        *args,
    )
    path = pytester.path / out
    summaries = read_results(path)[1] if path.exists() else []
    return result, (summaries[0] if summaries else {})


@pytest.fixture
def aime_run(pytester: pytest.Pytester) -> Callable[..., tuple[pytest.RunResult, dict[str, Any]]]:
    """Run the tiny AIME suite in text-only mode against `server`; returns the result and the summary."""
    pytester.makepyfile(test_tiny=SUITE_FILE)
    data = write_jsonl(pytester.path / "tiny_aime.jsonl", TINY_PROBLEMS)

    def run(server: Any, *args: str, cache: str = "cache", out: str = "r.jsonl") -> tuple[Any, dict]:
        aime = (f"--dataset-path={data}", "--mode=text-only", "--val-n=2")
        return run_against(pytester, server, *aime, *args, cache=cache, out=out)

    return run


def ledger(folder: Path) -> list[dict[str, Any]]:
    path = folder / "batches.json"
    return json.loads(path.read_text())["batches"] if path.exists() else []
