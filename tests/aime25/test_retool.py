"""ReTool mode: the protocol parsers, tail truncation, and whole rollouts against a
scripted model over real sockets, with the real sandbox and the real scorer."""

from __future__ import annotations

import pytest
from pytest_agenteval.retool import ANSWER_MARKER

from pytest_agenteval.samplers import Completion, ToolCall
from pytest_agenteval.testing import OpenAITestServer, Reply, ScriptedToolModel, ServerConfig
from pytest_agenteval.tool_loop import Action, parse_native_action, parse_raw_action, truncate_tail
from tests.conftest import read_results

CALL = (
    "<tool_call>\n<function=code_interpreter>\n<parameter=code>\nprint(1+1)\n"
    "</parameter>\n</function>\n</tool_call>"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is \\boxed{2}.", Action("answer")),
        (f"Let me compute.\n{CALL}", Action("call", code="print(1+1)")),
        (f"{CALL}\n{CALL}", Action("invalid", reason="more than one tool call in a turn")),
        (
            f"So \\boxed{{2}}\n{CALL}",
            Action("invalid", reason="a tool call and a final answer in the same turn"),
        ),
        (
            "<tool_call>\n<function=bash>\n<parameter=code>\nls\n</parameter>\n</function>\n</tool_call>",
            Action("invalid", reason="tool call without <function=code_interpreter>"),
        ),
        (
            "<tool_call>\n<function=code_interpreter>\n</function>\n</tool_call>",
            Action("invalid", reason="tool call without a code parameter"),
        ),
        (
            # cut off by the token limit
            "<tool_call>\n<function=code_interpreter>\n<parameter=code>\nx = 1\nprint(x)",
            Action("call", code="x = 1\nprint(x)"),
        ),
    ],
)
def test_parse_raw_action(text: str, expected: Action) -> None:
    assert parse_raw_action(text, ANSWER_MARKER) == expected


def _native(*calls: ToolCall, text: str = "") -> Completion:
    return Completion(text=text, finish_reason="tool_calls", tool_calls=calls)


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        (_native(text="\\boxed{3}"), Action("answer")),
        (_native(ToolCall("code_interpreter", '{"code": "print(3)"}')), Action("call", code="print(3)")),
        (
            _native(ToolCall("code_interpreter", "{not json")),
            Action("invalid", reason="tool arguments are not valid JSON"),
        ),
        (
            _native(ToolCall("web_search", '{"q": "x"}')),
            Action("invalid", reason="unknown tool 'web_search'"),
        ),
        (
            _native(ToolCall("code_interpreter", '{"code": ""}')),
            Action("invalid", reason="tool call without a code string"),
        ),
        (
            _native(
                ToolCall("code_interpreter", '{"code": "1"}'), ToolCall("code_interpreter", '{"code": "2"}')
            ),
            Action("invalid", reason="more than one tool call in a turn"),
        ),
        (
            _native(ToolCall("code_interpreter", '{"code": "1"}'), text="\\boxed{1}"),
            Action("invalid", reason="a tool call and a final answer in the same turn"),
        ),
    ],
)
def test_parse_native_action(completion: Completion, expected: Action) -> None:
    assert parse_native_action(completion, ANSWER_MARKER) == expected


def test_truncate_tail_keeps_the_end_within_the_budget() -> None:
    def count(text: str) -> int:
        return len(text.split())

    text = " ".join(f"w{i}" for i in range(100))
    kept, truncated = truncate_tail(text, 10, count)
    assert truncated and kept.endswith("w99") and count(kept.split("\n", 1)[1]) == 10
    assert truncate_tail("short one", 10, count) == ("short one", False)


def _solve_with_tool(code: str):
    """Turn 0 calls the tool; turn 1 boxes whatever the tool printed."""
    return [
        Reply(text="Let me compute.", tool_calls=[{"name": "code_interpreter", "arguments": {"code": code}}]),
        lambda observation, body: (
            f"The tool printed {observation.strip()}, so \\boxed{{{observation.strip()}}}."
        ),
    ]


def _always_call(output_chars: int = 1):
    code = "print({i}); print('y' * " + str(output_chars) + ")"
    return [
        Reply(tool_calls=[{"name": "code_interpreter", "arguments": {"code": code.format(i=i)}}])
        for i in range(10)
    ]


RETOOL = ("--mode=retool", "--limit=1", "--val-n=2", "--sandbox-timeout=5")


@pytest.mark.parametrize("protocol", ["native", "text"])
def test_a_tool_call_then_an_answer(run_suite, protocol: str) -> None:
    script = ScriptedToolModel(_solve_with_tool("print(30 + 40)"), protocol=protocol)
    with OpenAITestServer(ServerConfig(script=script)) as server:
        result, out = run_suite(f"--endpoint={server.url}", *RETOOL, f"--tool-protocol={protocol}")
    result.assert_outcomes(passed=1)
    (problem,), (summary,) = read_results(out)
    generation = problem["generations"][0]
    assert (generation["correct"], generation["formatted"], generation["stop_reason"]) == (
        True,
        True,
        "answer",
    )
    assert (generation["code_calls"], generation["turns"], generation["code_ok"]) == (1, 2, 1)
    roles = [(e["role"], e.get("action"), e.get("status")) for e in generation["transcript"]]
    assert roles == [("assistant", "call", None), ("tool", None, "ok"), ("assistant", "answer", None)]
    assert generation["transcript"][1]["output"].strip() == "70"
    assert (summary["mean_code_calls"], summary["mean_turns"], summary["average_at_n"]) == (1.0, 2.0, 1.0)
    assert summary["sandbox"]["calls"] == 2 and summary["sandbox"]["success_rate"] == 1.0
    assert summary["sandbox"]["latency_ms"]["p50"] > 0 and summary["sandbox"]["containment"]


@pytest.mark.parametrize(
    ("args", "stop_reason", "calls", "turns"),
    [
        (("--max-code-calls=2",), "call_budget", 2, 3),
        (("--max-code-calls=9", "--max-assistant-turns=3"), "turn_budget", 3, 3),
        (("--max-trajectory-tokens=400",), "token_budget", 2, 3),
    ],
)
def test_budgets_stop_the_trajectory(run_suite, args: tuple, stop_reason: str, calls, turns) -> None:
    # each observation is ~100 tokens: 400 tokens hold the prompt and two of them
    with OpenAITestServer(ServerConfig(script=ScriptedToolModel(_always_call(output_chars=400)))) as server:
        result, out = run_suite(f"--endpoint={server.url}", *RETOOL, *args)
    result.assert_outcomes(failed=1)
    (problem,), _ = read_results(out)
    generation = problem["generations"][0]
    assert generation["stop_reason"] == stop_reason
    assert (generation["code_calls"], generation["turns"]) == (calls, turns)


def test_invalid_protocol_stops_with_its_reason(run_suite) -> None:
    both = Reply(text="\\boxed{70}", tool_calls=[{"name": "code_interpreter", "arguments": {"code": "1"}}])
    with OpenAITestServer(ServerConfig(script=ScriptedToolModel([both]))) as server:
        result, out = run_suite(f"--endpoint={server.url}", *RETOOL)
    (problem,), _ = read_results(out)
    generation = problem["generations"][0]
    assert (generation["stop_reason"], generation["code_calls"], generation["turns"]) == (
        "invalid_protocol",
        0,
        1,
    )
    assert generation["transcript"][0]["invalid_reason"] == "a tool call and a final answer in the same turn"


def test_tool_output_is_tail_truncated_and_errors_are_reported(run_suite) -> None:
    flood = _solve_with_tool("print('x' * 3000)\nprint('tail-marker')\n1/0")
    with OpenAITestServer(ServerConfig(script=ScriptedToolModel(flood))) as server:
        result, out = run_suite(f"--endpoint={server.url}", *RETOOL, "--max-tool-response-tokens=40")
    (problem,), (summary,) = read_results(out)
    tool = problem["generations"][0]["transcript"][1]
    assert tool["status"] == "error" and tool["truncated"] is True
    assert tool["output"].startswith("...(truncated)") and "ZeroDivisionError" in tool["output"]
    assert len(tool["output"]) <= 4 * 40 + len("...(truncated)\n")
    assert summary["sandbox"]["error_rate"] == 1.0


BROKEN_SANDBOX = """
from pytest_agenteval.aime25 import Aime25
from pytest_agenteval.sandbox import ExecutionResult


class BrokenSandbox(Aime25):
    # The sandbox's own failure (its zygote died) cannot be caused on purpose from model
    # code, so this stands in for it: the one fake in these tests.
    async def rollout(self, ctx):
        async def died(code, context, index):
            return ExecutionResult("sandbox_error", "the sandbox process died", "", "", None, 0.1, False)

        ctx.resources.run_code = died
        return await super().rollout(ctx)


agenteval_suite = BrokenSandbox()


def test_aime25(evaluation):
    evaluation.check()
"""


def test_a_sandbox_failure_is_an_error_not_a_wrong_answer(pytester, tiny_aime) -> None:
    pytester.makepyfile(test_broken=BROKEN_SANDBOX)
    with OpenAITestServer(ServerConfig(script=ScriptedToolModel(_solve_with_tool("print(70)")))) as server:
        result = pytester.runpytest_subprocess(
            f"--dataset-path={tiny_aime}", f"--endpoint={server.url}", "--mode=retool", "--limit=1",
            "--val-n=1", "--agenteval-out=r.jsonl",
        )  # fmt: skip
    result.assert_outcomes(errors=1)
    (problem,), _ = read_results(pytester.path / "r.jsonl")
    assert problem["error"] == "sample 0: SandboxFailure: code call 1: the sandbox process died"


def test_a_prompt_over_the_trajectory_budget_is_an_error(run_suite) -> None:
    with OpenAITestServer(ServerConfig()) as server:
        result, out = run_suite(f"--endpoint={server.url}", *RETOOL, "--max-trajectory-tokens=20")
        requests = len(server.requests)
    result.assert_outcomes(errors=1)
    (problem,), _ = read_results(out)
    assert "PromptTooLong: the prompt alone is ~" in problem["error"] and requests == 0
