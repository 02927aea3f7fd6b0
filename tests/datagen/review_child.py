"""The review server's child process for tests/datagen/test_review_browser.py: a module of
its own with nothing to import but the product's review command, so the forkserver that
starts each child (a single-threaded process, unlike the xdist worker the test runs in)
imports it once and forks ready children."""

from __future__ import annotations

import sys

from pytest_agenteval.report import review


def serve(argv: list[str], stdout_path: str) -> None:
    """The review command's own main(), its stdout a file the test reads the address from."""
    with open(stdout_path, "w", buffering=1, encoding="utf-8") as out:
        sys.stdout = out
        sys.exit(review.main(argv))
