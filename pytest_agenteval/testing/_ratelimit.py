"""The test server's rate limit (`ServerConfig.max_concurrent`): at most that many
generation requests served at once; one more is refused at once with a 429 and
`Retry-After`, as a rate-limited API answers. A request holds its place until its reply
is complete (before its last bytes go out, as the log counts it)."""

from __future__ import annotations

from typing import Any

from aiohttp import web


class ConcurrencyLimit:
    def __init__(self, limit: int | None, retry_after: str | None) -> None:
        self.limit = limit  # None: no limit
        self.retry_after = retry_after
        self._admitted: set[int] = set()  # id() of each request being served
        self.peak = 0  # the most admitted at once
        self.refused = 0

    def admit(self, request: object) -> bool:
        """True: `request` is served (call `leave` when it is done); False: refuse it."""
        if self.limit is None:
            return True
        if len(self._admitted) >= self.limit:
            self.refused += 1
            return False
        self._admitted.add(id(request))
        self.peak = max(self.peak, len(self._admitted))
        return True

    def leave(self, request: object) -> None:
        self._admitted.discard(id(request))

    def refusal(self) -> web.Response:
        """The 429 OpenAI sends for a rate limit, with this limit in its message."""
        headers = {"Retry-After": self.retry_after} if self.retry_after is not None else None
        error = {
            "message": f"Rate limit reached: at most {self.limit} requests at once (max_concurrent).",
            "type": "rate_limit_error",
            "param": None,
            "code": "rate_limit_exceeded",
        }
        return web.json_response({"error": error}, status=429, headers=headers)

    def reset(self) -> None:
        self.peak, self.refused = len(self._admitted), 0

    def stats(self) -> dict[str, Any]:
        """The stats' `rate_limit` (only with a limit): the limit, the requests refused
        and the most served at once."""
        if self.limit is None:
            return {}
        counts = {"max_concurrent": self.limit, "refused": self.refused, "max_admitted": self.peak}
        return {"rate_limit": counts}
