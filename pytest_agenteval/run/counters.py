"""What one process has finished, for the live progress line (see plugin/progress.py)."""

from __future__ import annotations

from typing import Any

from pytest_agenteval.api.records import counted_tokens


class Counters:
    """One process's finished rollouts; updated on its engine loop thread."""

    def __init__(self) -> None:
        self.total = 0
        self.done = 0
        self.errors = 0
        self.tokens = 0  # completion tokens generated in this run (cache hits excluded)

    def finished(self, rollout: Any) -> None:
        self.done += 1
        if not rollout.cached:
            self.tokens += counted_tokens(rollout)[1]  # a shared request's usage once

    def failed(self) -> None:
        self.done += 1
        self.errors += 1
