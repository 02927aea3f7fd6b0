"""`--concurrency auto`: one endpoint's limit found by AIMD (additive increase,
multiplicative decrease), as TCP finds a link's capacity. The limit starts low, grows by
one after each window of successes as large as the limit, and halves (never below 1) on a
429 or an overload reply, never above the ceiling. One overload halves once: the replies
to requests sent before the last halving say nothing about the new limit. Every change is
kept, with when and why, for the summary."""

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


@dataclass(frozen=True)
class LimitChange:
    at: float  # time.time() of the change
    endpoint: str
    old: int
    new: int
    why: str  # "successes", or the overload's cause: "429", "503", "529", "overloaded"


class AimdLimit:
    """One endpoint's adaptive limit. `succeeded` and `overloaded` return the change they
    made, or None. A success counts toward the window only while the limit was reached
    (`busy`): a run that never fills its slots learns nothing about the endpoint's."""

    def __init__(self, endpoint: str, start: int, ceiling: int) -> None:
        if not 1 <= start <= ceiling:
            raise ValueError(f"need 1 <= start <= ceiling, got {start} and {ceiling}")
        self.endpoint = endpoint
        self.start = self.limit = start
        self.ceiling = ceiling
        self._successes = 0
        self._halved_at = float("-inf")  # monotonic time of the last halving

    def succeeded(self, busy: bool) -> LimitChange | None:
        if not busy:
            return None
        self._successes += 1
        if self._successes < self.limit or self.limit >= self.ceiling:
            return None
        return self._change(self.limit + 1, "successes")

    def overloaded(self, cause: str, sent: float, now: float | None = None) -> LimitChange | None:
        """An overload reply to a request sent at `sent` (monotonic): halve, unless the
        request went out before the last halving (that overload is already answered)."""
        if sent < self._halved_at:
            return None
        self._halved_at = time.monotonic() if now is None else now
        return self._change(max(1, self.limit // 2), cause)

    def _change(self, new: int, why: str) -> LimitChange | None:
        self._successes = 0
        if new == self.limit:
            return None  # at 1, halving changes nothing
        change = LimitChange(time.time(), self.endpoint, self.limit, new, why)
        self.limit = new
        return change
