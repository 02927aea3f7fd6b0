"""`ServerConfig.response_formats`: a server without structured output answers 400."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from pytest_agenteval.testing import OpenAITestServer, ServerConfig


def post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{url}/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(
    ("allowed", "kind", "status"),
    [
        (None, "json_schema", 200),
        (("json_object",), "json_object", 200),
        (("json_object",), "json_schema", 400),
        ((), "json_object", 400),
        ((), None, 200),  # no response_format at all: always fine
    ],
)
def test_response_format_types(allowed, kind, status) -> None:
    body = dict(BODY, response_format={"type": kind}) if kind else BODY
    with OpenAITestServer(ServerConfig(response_formats=allowed)) as server:
        code, payload = post(server.url, body)
        outcome = server.requests[-1]["outcome"]
    assert code == status
    if status == 400:
        assert payload["error"]["message"] == f"response_format type {kind!r} is not supported"
        assert outcome == "400"
