"""`--concurrency auto`: one endpoint's limit found from the replies, after inspect_ai's
adaptive connections and TCP's congestion control:

- slow start: the limit starts low and doubles after each window of successes as large
  as the limit, until the first 429 or overload reply, which halves it (rounded down,
  never below 1: a 429 at the starting 4 gives 2);
- then additive increase, multiplicative decrease: +1 after each window of successes,
  and on each overload a cut to 9/10 (a sawtooth between 9/10 of the endpoint's limit and
  one over it serves about 95 % of what a fixed limit equal to it serves; a halving
  serves 75 %);
- only replies to requests sent after the last change (a growth as well as a cut) move
  the limit: the others were sent under an older limit and say nothing about this one;
- between 1 and the ceiling (--concurrency-max), and a success counts only while the
  limit was reached (a run that never fills its slots learns nothing about the endpoint).

Every change is kept, with when and why, for the summary's history."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from pytest_agenteval.models.http.replies import error_message

AUTO_START = 4  # the run's starting limit per endpoint (split among xdist workers, at least 1)

# Retry causes (the HTTP status, or `overloaded`) that say the endpoint has too much to do:
# a rate limit (429), an overloaded or full server (vLLM and SGLang answer 503 when their
# queue is full; OpenAI 503 "The engine is currently overloaded"; 529 "Overloaded").
OVERLOAD_CAUSES = frozenset({"429", "503", "529", "overloaded"})
# A 400 or 500 whose message says the server is overloaded: retried as `overloaded`.
_OVERLOAD_MESSAGE = re.compile(
    r"overload|queue is full|too many (concurrent )?requests|server is busy|rate.?limit", re.IGNORECASE
)


def says_overloaded(status: int, raw: bytes) -> bool:
    """A 400 or 500 reply whose message says the server is overloaded (a 429, 503 or 529
    says it by its status)."""
    return status in (400, 500) and bool(_OVERLOAD_MESSAGE.search(error_message(raw)))


def auto_start(concurrency: int | str, share: int, ceiling: int) -> int | None:
    """This process's starting limit under `--concurrency auto` (None: a fixed limit):
    AUTO_START for the whole run, split among the xdist workers as the ceiling is (this
    process has `share` of --concurrency-max, `ceiling`), at least 1."""
    if concurrency != "auto":
        return None
    return max(1, min(share, round(AUTO_START * share / max(1, ceiling))))


# After slow start, an overload cuts the limit to this fraction of it (at least by one).
DECREASE = 0.9
SLOW_START = "slow_start"  # LimitChange.why of a doubling
ADDITIVE = "successes"  # LimitChange.why of a +1 after slow start


@dataclass(frozen=True)
class LimitChange:
    at: float  # time.time() of the change
    endpoint: str
    old: int
    new: int
    why: str  # SLOW_START, ADDITIVE, or the overload's cause: "429", "503", "529", "overloaded"


class AimdLimit:
    """One endpoint's adaptive limit. `succeeded` and `overloaded` are told of each reply
    (`sent`: when its request went out, time.monotonic(); `now`: the reply's time, for
    scripted tests) and return the change they made, or None."""

    def __init__(self, endpoint: str, start: int, ceiling: int) -> None:
        if not 1 <= start <= ceiling:
            raise ValueError(f"need 1 <= start <= ceiling, got {start} and {ceiling}")
        self.endpoint = endpoint
        self.start = self.limit = start
        self.ceiling = ceiling
        self.slow_start = True  # doubling, until the first overload
        self._successes = 0  # in the window at this limit
        self._changed_at = float("-inf")  # monotonic time of the last change

    def succeeded(self, sent: float, busy: bool = True, now: float | None = None) -> LimitChange | None:
        """A success of a request sent at `sent`; `busy`: the endpoint had its limit in
        flight. A window of `limit` successes doubles the limit in slow start, else adds one."""
        if not busy or sent < self._changed_at:
            return None  # the limit was not reached, or the request went out under an older one
        self._successes += 1
        if self._successes < self.limit or self.limit >= self.ceiling:
            return None
        if self.slow_start:
            return self._change(min(2 * self.limit, self.ceiling), SLOW_START, now)
        return self._change(self.limit + 1, ADDITIVE, now)

    def overloaded(self, cause: str, sent: float, now: float | None = None) -> LimitChange | None:
        """An overload reply (`cause`: "429", "503", ...) to a request sent at `sent`: the
        end of slow start halves the limit, a later one cuts it to DECREASE of it; never
        below 1. A request sent before the last change says nothing about this limit."""
        if sent < self._changed_at:
            return None
        if self.slow_start:
            self.slow_start = False
            new = self.limit // 2
        else:
            new = min(self.limit - 1, int(self.limit * DECREASE))
        return self._change(max(1, new), cause, now)

    def _change(self, new: int, why: str, now: float | None) -> LimitChange | None:
        self._successes = 0
        if new == self.limit:
            return None  # at 1, a cut changes nothing
        self._changed_at = time.monotonic() if now is None else now
        change = LimitChange(time.time(), self.endpoint, self.limit, new, why)
        self.limit = new
        return change
