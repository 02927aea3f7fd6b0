"""Endpoint health: a circuit breaker per endpoint, and the throughput each has shown.

A dead or failing endpoint among several leaves the rotation after most of its recent
requests failed, and comes back through one half-open probe after a cooldown that
doubles while it keeps failing. 429s are neither: the endpoint is alive, only busy.
The throughput record gives non-streamed requests a deadline from `max_tokens`, so a
silent server is caught without capping an honest long generation."""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

WINDOW = 20  # recent outcomes per endpoint
TRIP_FAILURES = 14  # of the last WINDOW: 70 %; 20 % random faults trip it about once in 10^6
BASE_COOLDOWN_S = 1.0
MAX_COOLDOWN_S = 30.0
RATE_SAMPLES = 64  # recent throughputs per endpoint
MIN_RATES = 3  # before this many, a non-streamed request has only --request-timeout
DEADLINE_FACTOR = 3.0  # a deadline allows this many times the slowest recent throughput


@dataclass
class _State:
    outcomes: deque[bool] = field(default_factory=lambda: deque(maxlen=WINDOW))  # True: failed
    open_until: float | None = None  # out of the rotation until then
    trips: int = 0  # consecutive openings (the cooldown doubles with each)
    probing: bool = False  # its one half-open request is in flight
    rates: deque[float] = field(default_factory=lambda: deque(maxlen=RATE_SAMPLES))  # tokens/s a sequence
    retired: bool = False  # a launched server that exited: out for good


class EndpointHealth:
    def __init__(self, endpoints: Sequence[str], clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._states = {url: _State() for url in endpoints}
        self._down_since: float | None = None  # every endpoint out of the rotation since
        self.counts = Counter[str]()

    # -- choosing ----------------------------------------------------------------
    def pick(
        self, in_flight: Mapping[str, int], avoid: str | None = None, full: frozenset[str] = frozenset()
    ) -> tuple[str | None, float | None]:
        """(endpoint, 0) to send to now: the least loaded in the rotation, else one
        whose cooldown is over as a half-open probe; (None, None) when those are all
        `full` (at --concurrency: wait for a slot); or (None, seconds to wait). `avoid`
        (the endpoint that just failed this request) is used only when it is the one
        left in the rotation: while the others are full, the request waits for them."""
        now = self._clock()
        closed = [url for url, s in self._states.items() if s.open_until is None]
        if closed:
            choices = [url for url in closed if url != avoid] or closed
            free = [url for url in choices if url not in full]
            if not free:
                return None, None
            return min(free, key=lambda url: in_flight.get(url, 0)), 0.0
        ready = [url for url, s in self._states.items() if not s.probing and s.open_until <= now]  # type: ignore[operator]
        if ready and all(url in full for url in ready):
            return None, None  # late replies still hold its slots: the next release
        ready = [url for url in ready if url not in full]
        if ready:
            url = min(ready, key=lambda u: self._states[u].open_until or 0.0)
            self._states[url].probing = True
            self.counts["circuit_probes"] += 1
            return url, 0.0
        open_ = [s for s in self._states.values() if not s.probing and not s.retired and s.open_until]
        waits = [s.open_until - now for s in open_]  # type: ignore[operator]
        return None, max(0.01, min(waits, default=0.05))

    def retire(self, url: str) -> None:
        """Out of the rotation for good (a launched server that has exited)."""
        state = self._states[url]
        state.retired, state.probing, state.open_until = True, False, float("inf")
        self.counts["retired"] += 1
        if self._down_since is None and all(s.open_until is not None for s in self._states.values()):
            self._down_since = self._clock()

    def all_retired(self) -> bool:
        return all(s.retired for s in self._states.values())

    def healthy_other_than(self, url: str) -> bool:
        return any(s.open_until is None for other, s in self._states.items() if other != url)

    def all_down_for(self) -> float:
        """Seconds every endpoint has been out of the rotation (0 while one is in)."""
        return 0.0 if self._down_since is None else self._clock() - self._down_since

    # -- outcomes ----------------------------------------------------------------
    def succeeded(self, url: str, tokens_per_sequence: float = 0.0, seconds: float = 0.0) -> None:
        state = self._states[url]
        if state.retired:  # a late reply from a server that has since exited
            return
        state.outcomes.append(False)
        state.probing = False
        if tokens_per_sequence > 0 and seconds > 0:
            state.rates.append(tokens_per_sequence / seconds)
        if state.open_until is not None:  # a probe (or a late reply) got through: back in
            state.open_until, state.trips = None, 0
            state.outcomes.clear()
            self._down_since = None
            self.counts["circuit_closed"] += 1

    def failed(self, url: str) -> None:
        state = self._states[url]
        state.outcomes.append(True)
        if state.retired:
            return
        if state.probing or (state.open_until is None and sum(state.outcomes) >= TRIP_FAILURES):
            state.probing = False
            self._open(url, state)

    def neutral(self, url: str) -> None:
        """A reply that says nothing of health (429): frees a probe slot only."""
        self._states[url].probing = False

    release = neutral  # after every request, however it ended: a probe never stays taken

    def _open(self, url: str, state: _State) -> None:
        now = self._clock()
        state.trips += 1
        state.open_until = now + min(MAX_COOLDOWN_S, BASE_COOLDOWN_S * 2 ** (state.trips - 1))
        self.counts["circuit_opened"] += 1
        if self._down_since is None and all(s.open_until is not None for s in self._states.values()):
            self._down_since = now

    # -- deadlines ---------------------------------------------------------------
    def deadline(self, url: str, max_tokens: int, slack_s: float) -> float | None:
        """Seconds a non-streamed request of `max_tokens` may take on `url`: `slack_s`
        plus DEADLINE_FACTOR x the time at the slowest throughput it has shown recently;
        None before it has shown MIN_RATES."""
        rates = self._states[url].rates
        if len(rates) < MIN_RATES:
            return None
        return slack_s + DEADLINE_FACTOR * max_tokens / min(rates)
