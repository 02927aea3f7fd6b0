"""--thinking and --think-tags through the plugin: what goes on the wire, what a bad value
says at start-up, and a reasoning model's reply recorded as its answer alone."""

from __future__ import annotations

import pytest

from pytest_agenteval.testing import OpenAITestServer, ServerConfig, think_reply
from tests.conftest import read_results


@pytest.mark.parametrize(
    ("flag", "sent"),
    [
        ("--thinking=on", {"enable_thinking": True}),
        ("--thinking=off", {"enable_thinking": False}),
        ("--thinking=omit", None),
    ],
)
def test_thinking_goes_on_the_wire(run_suite, flag: str, sent: dict | None) -> None:
    with OpenAITestServer(ServerConfig(log_bodies=True)) as server:
        result, _ = run_suite(f"--endpoint={server.url}", "--val-n=1", "--limit=1", flag)
        (request,) = server.requests
    assert result.ret == 0, result.stdout.str()
    assert request["body"].get("chat_template_kwargs") == sent


@pytest.mark.parametrize("value", ["<think>", "<think>,</think>,x", "<t>,<t>"])
def test_a_bad_think_tags_is_a_start_up_error(run_suite, value: str) -> None:
    result, _ = run_suite(f"--think-tags={value}", "--val-n=1", "--limit=1")
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        [f"ERROR: --think-tags {value!r}: give the opening and closing tag separated by a comma, e.g. *"]
    )


@pytest.mark.parametrize("n", ["-n0", "-n2"])
def test_the_recorded_text_is_the_answer_after_the_thoughts(run_suite, n: str) -> None:
    reply = think_reply("maybe \\boxed{1}? no.", "So \\boxed{70}.", tags=("[THINK]", "[/THINK]"))
    with OpenAITestServer(ServerConfig(answer=reply.text or "")) as server:
        result, out = run_suite(
            f"--endpoint={server.url}", "--val-n=1", "--limit=2", "--think-tags=[THINK],[/THINK]", n
        )
    assert result.ret in (0, 1), result.stdout.str()
    problems, _ = read_results(out)
    assert [g["text"] for p in problems for g in p["generations"]] == ["So \\boxed{70}."] * 2
