"""Bounded retries: exponential backoff with full jitter, honouring Retry-After."""

from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
FATAL_STATUS = frozenset({400, 401, 403, 404, 422})


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 8  # requests per sample, the first included
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    max_total_s: float = 600.0  # give up when the next wait would pass this since the first try

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait before attempt `attempt + 1` (attempt counts from 1)."""
        backoff = min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))
        wait = rng.uniform(0, backoff)
        if retry_after is not None:
            wait = max(wait, retry_after)  # the server knows best; max_total_s bounds it
        return wait

    def should_retry(self, attempt: int, started: float, wait: float) -> bool:
        if attempt >= self.max_attempts:
            return False
        return (time.monotonic() - started) + wait <= self.max_total_s


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
