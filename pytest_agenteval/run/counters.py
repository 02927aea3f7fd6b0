"""What one process has done, for the live progress line (see plugin/progress.py):
generations finished and errored, and what moves inside the ones still running (tokens,
turns, tool calls, judge calls; api/progress.py)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

from pytest_agenteval.api import progress
from pytest_agenteval.api.records import counted_tokens

MOVING = ("turns", "tool_calls", "judge_calls")


class Counters:
    """One process's rollouts; updated on its engine loop thread (and, for tokens
    sampled in-process, the backend's thread)."""

    def __init__(self) -> None:
        self.total = 0
        self.done = 0  # generations finished (errored ones not among them)
        self.errors = 0  # generations that raised
        self.tokens = 0  # completion tokens of the finished generations (cache hits excluded)
        self.finished_moving = dict.fromkeys(MOVING, 0)
        self.running: list[progress.Tally] = []
        self._outside_before = dataclasses.replace(progress.outside())  # an earlier run's, in-process

    @contextlib.contextmanager
    def rollout(self) -> Iterator[progress.Tally]:
        """Around one rollout: what it does while running is counted live."""
        tally = progress.Tally()
        self.running.append(tally)
        try:
            with progress.tracking(tally):
                yield tally
        finally:
            self.running.remove(tally)
            for key in MOVING:
                self.finished_moving[key] += getattr(tally, key)

    def finished(self, rollout: Any, tally: progress.Tally | None = None) -> None:
        self.done += 1
        counted = 0 if rollout.cached else counted_tokens(rollout)[1]  # a shared request's usage once
        # what was counted live (judge calls inside the rollout too), never less than its record
        self.tokens += max(counted, tally.generated if tally is not None else 0)

    def failed(self, tally: progress.Tally | None = None) -> None:
        self.errors += 1
        if tally is not None:
            self.tokens += tally.generated  # generated, even if the generation is lost

    def snapshot(self) -> dict[str, int]:
        """Counts for the progress line: `tokens` with what running generations have
        generated so far, `finished_tokens` those of finished ones only (for the ETA)."""
        running = list(self.running)  # another thread may change the list
        now, before = progress.outside(), self._outside_before
        outside = progress.Tally(
            *(getattr(now, f.name) - getattr(before, f.name) for f in dataclasses.fields(progress.Tally))
        )
        live = sum(t.generated for t in running)
        moving = {
            key: self.finished_moving[key] + getattr(outside, key) + sum(getattr(t, key) for t in running)
            for key in MOVING
        }
        return {
            "total": self.total,
            "done": self.done,
            "errors": self.errors,
            "finished_tokens": self.tokens,
            "tokens": self.tokens + live + outside.generated,
            "running_tokens": live,
            **moving,
        }
