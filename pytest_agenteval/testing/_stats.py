"""In-flight accounting and the request log (thread-safe: read from the test thread)."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any


class InFlightTracker:
    """Current / max / time-weighted mean number of outstanding requests.

    ``mean_in_flight`` = (integral of in_flight dt from the first arrival to the last
    response) / that span. ``mean_in_flight_busy`` divides the same integral by the time
    during which at least one request was outstanding (idle gaps excluded).
    Times come from ``time.monotonic``; wall-clock values are derived for reporting.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wall_offset = time.time() - time.monotonic()
        self._clear(time.monotonic())

    def _clear(self, now: float) -> None:
        self.current = getattr(self, "current", 0)  # outstanding requests survive a reset
        self.max = self.current
        self.integral = 0.0
        self.busy = 0.0
        self.first: float | None = now if self.current else None
        self.last: float | None = None
        self.changed = now

    def _advance(self, now: float) -> None:
        if self.current:
            self.integral += self.current * (now - self.changed)
            self.busy += now - self.changed
        self.changed = now

    def enter(self) -> None:
        with self._lock:
            now = time.monotonic()
            self._advance(now)
            if self.first is None:
                self.first = now
            self.current += 1
            self.max = max(self.max, self.current)

    def exit(self) -> None:
        with self._lock:
            now = time.monotonic()
            self._advance(now)
            self.current -= 1
            self.last = now

    def reset(self) -> None:
        with self._lock:
            self._clear(time.monotonic())

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            now = time.monotonic()
            live = now - self.changed if self.current else 0.0
            integral = self.integral + self.current * live
            busy = self.busy + live
            end = now if self.current else self.last
            span = (end - self.first) if self.first is not None and end is not None else 0.0
            return {
                "in_flight": self.current,
                "max_in_flight": self.max,
                "mean_in_flight": integral / span if span > 0 else 0.0,
                "mean_in_flight_busy": integral / busy if busy > 0 else 0.0,
                "busy_s": busy,
                "span_s": span,
                "first_arrival": self._wall(self.first),
                "last_response": self._wall(self.last),
            }

    def _wall(self, t: float | None) -> float | None:
        return None if t is None else t + self._wall_offset


class RequestLog:
    """Every generation request, in completion order; optionally mirrored to JSONL."""

    def __init__(self, path: str | Path | None = None) -> None:
        self._lock = threading.Lock()
        self._entries: list[dict[str, Any]] = []
        self._path = path
        self._file: IO[str] | None = None  # opened on first use, so an unstarted server holds none

    def append(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry) if self._path is not None else ""
        with self._lock:
            self._entries.append(entry)
            if self._path is not None:
                if self._file is None:
                    self._file = open(self._path, "a", encoding="utf-8")
                self._file.write(line + "\n")
                self._file.flush()  # readable by another process while the server runs

    def entries(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def outcome_counts(entries: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    return dict(Counter(str(e["outcome"]) for e in entries))


def attempts_by_key(entries: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Outcomes per request key, in attempt order (e.g. ``["503", "reset", "ok"]``)."""
    grouped: dict[str, list[tuple[int, str]]] = {}
    for e in entries:
        grouped.setdefault(str(e["key"]), []).append((int(e.get("attempt") or 0), e["outcome"]))
    return {k: [o for _, o in sorted(v)] for k, v in grouped.items()}


def faults_before_success(entries: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Per key that eventually succeeded: how many attempts failed before the ``ok``."""
    result: dict[str, int] = {}
    for key, outcomes in attempts_by_key(entries).items():
        if "ok" in outcomes:
            result[key] = outcomes.index("ok")
    return result
