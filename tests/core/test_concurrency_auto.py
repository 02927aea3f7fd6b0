"""The test server's rate limit (`max_concurrent`): one request over it gets a 429."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

from pytest_agenteval.testing import OpenAITestServer


def test_the_server_refuses_requests_over_its_rate_limit_with_a_429() -> None:
    """max_concurrent=2 and three requests at once: the third gets a 429 with Retry-After."""
    with OpenAITestServer(latency_ms=300, max_concurrent=2) as server:
        statuses: list[tuple[int, str | None, str]] = []

        def post(seed: int) -> None:
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "seed": seed}
            request = urllib.request.Request(
                f"{server.url}/chat/completions",
                json.dumps(body).encode(),
                {"Content-Type": "application/json"},
            )
            try:
                with urllib.request.urlopen(request, timeout=10) as reply:
                    statuses.append((reply.status, None, ""))
            except urllib.error.HTTPError as refused:
                message = json.loads(refused.read())["error"]["message"]
                statuses.append((refused.code, refused.headers.get("Retry-After"), message))

        threads = [threading.Thread(target=post, args=(seed,)) for seed in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stats = server.stats()
    assert sorted(statuses) == [
        (200, None, ""),
        (200, None, ""),
        (429, "0.1", "Rate limit reached: at most 2 requests at once (max_concurrent)."),
    ]
    assert stats["outcomes"] == {"ok": 2, "rate_limited": 1}
    assert stats["rate_limit"] == {"max_concurrent": 2, "refused": 1, "max_admitted": 2}
