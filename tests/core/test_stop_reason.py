"""A generation's `stop_reason` says what happened: `answer` only where the scorer found one.
It was `answer` for every generation that stopped on its own, answer or not; and the
failure section said `answers [None]` for a generation without one."""

from __future__ import annotations

import pytest

from pytest_agenteval.testing import OpenAITestServer, Reply, ScriptedToolModel, ServerConfig
from tests.conftest import read_results


@pytest.mark.parametrize(
    ("mode", "reply", "stop_reason", "formatted"),
    [
        ("text-only", "so \\boxed{70}", "answer", True),
        ("text-only", "I cannot tell.", "no_answer", False),
        ("retool", "so \\boxed{70}", "answer", True),
        ("retool", "I cannot tell.", "no_answer", False),
    ],
)
def test_stop_reason_is_no_answer_where_none_was_given(
    run_suite, mode: str, reply: str, stop_reason: str, formatted: bool
) -> None:
    with OpenAITestServer(ServerConfig(script=ScriptedToolModel([Reply(text=reply)]))) as server:
        result, out = run_suite(f"--endpoint={server.url}", f"--mode={mode}", "--limit=1", "--val-n=1")
    (problem,), _ = read_results(out)
    generation = problem["generations"][0]
    assert (generation["stop_reason"], generation["formatted"]) == (stop_reason, formatted)
    if not formatted:  # the failure section said `answers [None]`
        assert "0/1 correct; expected '70', answers [no answer]" in result.stdout.lines
