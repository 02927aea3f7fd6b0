"""The public fixtures: a user's test gets a running test server, configured through the
factory, and every server is closed when the test ends; registering them costs no import."""

from __future__ import annotations

import subprocess
import sys

import pytest

USER_TESTS = """
import json
import urllib.error
import urllib.request

URLS = []


def chat(url, text):
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": text}]}).encode()
    request = urllib.request.Request(url + "/chat/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.load(reply)["choices"][0]["message"]["content"]


def test_default_server(agenteval_openai_server):
    URLS.append(agenteval_openai_server.url)
    with urllib.request.urlopen(agenteval_openai_server.url + "/models", timeout=10) as reply:
        assert [m["id"] for m in json.load(reply)["data"]] == ["mock-model"]


def test_configured_servers(agenteval_openai_server_factory):
    first = agenteval_openai_server_factory(answer="It is \\\\boxed{42}.")
    second = agenteval_openai_server_factory(answers={"q": "\\\\boxed{7}"}, answer="none")
    URLS.extend([first.url, second.url])
    assert chat(first.url, "anything") == "It is \\\\boxed{42}."
    assert chat(second.url, "q") == "\\\\boxed{7}"
    assert second.stats()["total_requests"] == 1


def test_every_server_was_closed_after_its_test():
    assert len(URLS) == 3
    for url in URLS:
        try:
            urllib.request.urlopen(url + "/models", timeout=5)
        except urllib.error.URLError as exc:
            assert isinstance(exc.reason, ConnectionRefusedError)
        else:
            raise AssertionError(f"{url} still answers")
"""


def test_a_users_tests_get_servers_that_close_with_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-q")
    result.assert_outcomes(passed=3)


def test_registering_the_fixtures_imports_no_server() -> None:
    code = "import sys, pytest_agenteval.testing.fixtures; print('aiohttp.web' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout == "False\n"
