"""ReTool mode end to end: whole rollouts against a scripted model over real sockets, with
the real sandbox and the real scorer. What the lab's rollout.py does at each step is what
these check: its prompt and schema on the wire, its parser, its budgets, its observations."""

from __future__ import annotations

import json

import pytest

from pytest_agenteval.tasks.aime25 import CODE_TOOL, SYSTEM_PROMPT
from pytest_agenteval.testing import OpenAITestServer, Reply, ScriptedToolModel, ServerConfig
from tests.conftest import read_results


def _call(code: str) -> Reply:
    return Reply(tool_calls=[{"name": "code_interpreter", "arguments": {"code": code}}])


def _solve_with_tool(code: str):
    """Turn 0 calls the tool; turn 1 boxes whatever the tool printed."""
    return [
        Reply(text="Let me compute.", tool_calls=[{"name": "code_interpreter", "arguments": {"code": code}}]),
        lambda observation, body: (
            f"The tool printed {observation.strip()}, so \\boxed{{{observation.strip()}}}."
        ),
    ]


def _always_call(output_chars: int = 1):
    return [_call(f"print({i}); print('y' * {output_chars})") for i in range(10)]


RETOOL = ("--mode=retool", "--limit=1", "--val-n=2", "--sandbox-timeout=5")


def _generation(out) -> dict:
    (problem,), _ = read_results(out)
    return problem["generations"][0]


@pytest.mark.parametrize("protocol", ["native", "text"])
def test_a_tool_call_then_an_answer(run_suite, protocol: str) -> None:
    script = ScriptedToolModel(_solve_with_tool("print(30 + 40)"), protocol=protocol)
    with OpenAITestServer(ServerConfig(script=script)) as server:
        result, out = run_suite(f"--endpoint={server.url}", *RETOOL)
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
    assert generation["transcript"][1]["output"] == "70\n"
    assert (summary["mean_code_calls"], summary["mean_turns"], summary["average_at_n"]) == (1.0, 2.0, 1.0)
    assert summary["sandbox"]["calls"] == 2 and summary["sandbox"]["success_rate"] == 1.0
    assert (problem["problem_id"], problem["ground_truth"], generation["predicted_answer"]) == (0, "70", "70")
    assert summary["continuation"] == {"messages": 2}


def test_the_wire_carries_the_lab_s_prompt_schema_and_tool_messages(run_suite) -> None:
    script = ScriptedToolModel(_solve_with_tool("print(30 + 40)"), protocol="text")
    with OpenAITestServer(ServerConfig(script=script, log_bodies=True)) as server:
        result, _ = run_suite(f"--endpoint={server.url}", "--mode=retool", "--limit=1", "--val-n=1")
        first, second = sorted(server.requests, key=lambda r: len(r["body"]["messages"]))
    result.assert_outcomes(passed=1)
    system, user = first["body"]["messages"]
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    assert user == {"role": "user", "content": "What is 30 + 40?"}
    assert [json.dumps(t) for t in first["body"]["tools"]] == [json.dumps(CODE_TOOL)]
    assert second["body"]["tools"] == first["body"]["tools"]
    assistant, tool = second["body"]["messages"][2:]
    assert assistant["role"] == "assistant" and assistant["content"].startswith(
        "Let me compute.\n<tool_call>"
    )
    assert tool == {
        "role": "tool",
        "tool_call_id": "code-0-0-1",
        "name": "code_interpreter",
        "content": "70\n",
    }
    assert first["body"]["chat_template_kwargs"] == {"enable_thinking": False}


def test_code_that_prints_nothing_shows_nothing(run_suite) -> None:
    script = ScriptedToolModel(_solve_with_tool("import sympy\nsympy.factorint(2024)"))
    with OpenAITestServer(ServerConfig(script=script)) as server:
        _, out = run_suite(f"--endpoint={server.url}", "--mode=retool", "--limit=1", "--val-n=1")
    assert _generation(out)["transcript"][1]["output"] == ""  # the lab never auto-prints


@pytest.mark.parametrize(
    ("args", "stop_reason", "calls", "turns"),
    [
        (("--max-code-calls=2",), "call_budget", 2, 3),
        (("--max-code-calls=9", "--max-assistant-turns=3"), "turn_budget", 2, 3),  # turn 3's call not run
    ],
)
def test_call_and_turn_budgets_stop_the_trajectory(
    run_suite, args: tuple, stop_reason: str, calls, turns
) -> None:
    with OpenAITestServer(ServerConfig(script=ScriptedToolModel(_always_call()))) as server:
        result, out = run_suite(f"--endpoint={server.url}", *RETOOL, *args)
    result.assert_outcomes(failed=1)
    generation = _generation(out)
    assert generation["stop_reason"] == stop_reason
    assert (generation["code_calls"], generation["turns"]) == (calls, turns)
    assert generation["text"].startswith("<tool_call>")  # the final text is the unrun call


def test_an_observation_that_does_not_fit_is_shrunk_not_dropped(run_suite) -> None:
    # each output is ~300 tokens (estimated): the third no longer fits whole
    with OpenAITestServer(ServerConfig(script=ScriptedToolModel(_always_call(output_chars=1200)))) as server:
        _, out = run_suite(f"--endpoint={server.url}", *RETOOL, "--max-trajectory-tokens=1100")
    generation = _generation(out)
    tools = [e for e in generation["transcript"] if e["role"] == "tool"]
    turns = [e for e in generation["transcript"] if e["role"] == "assistant"]
    shrunk = tools[-1]
    assert shrunk["shown"] and shrunk["truncated"] and shrunk["output"].startswith("[... truncated ...]\n")
    assert generation["code_calls"] == len(tools) == 3 and all(t["shown"] for t in tools)
    # the last turn had only the room left: cut off mid-call, which the lab's parser calls invalid
    assert (turns[-1]["finish_reason"], generation["stop_reason"]) == ("length", "invalid_protocol")


def test_an_observation_that_never_fits_ends_the_trajectory(run_suite) -> None:
    with OpenAITestServer(ServerConfig(script=ScriptedToolModel(_always_call(output_chars=1200)))) as server:
        _, out = run_suite(f"--endpoint={server.url}", *RETOOL, "--max-trajectory-tokens=1000")
    generation = _generation(out)
    tools = [e for e in generation["transcript"] if e["role"] == "tool"]
    assert generation["stop_reason"] == "token_budget" and [t["shown"] for t in tools] == [True, True, False]
    assert generation["code_calls"] == 2 and generation["text"].startswith("<tool_call>")  # the unshown call


def test_trailing_text_after_a_call_is_invalid(run_suite) -> None:
    call = (
        "<tool_call>\n<function=code_interpreter>\n<parameter=code>\nprint(1)\n</parameter>\n"
        "</function>\n</tool_call>"
    )
    turns = [f"{call}\n<tool_response>\n70\n</tool_response>\nSo \\boxed{{70}}"]
    with OpenAITestServer(ServerConfig(script=ScriptedToolModel(turns))) as server:
        _, out = run_suite(f"--endpoint={server.url}", *RETOOL)
    generation = _generation(out)
    assert (generation["stop_reason"], generation["code_calls"], generation["turns"]) == (
        "invalid_protocol",
        0,
        1,
    )
    assert generation["correct"] is True  # the lab scores the invalid turn's boxed answer


def test_a_call_after_a_boxed_answer_still_runs(run_suite) -> None:
    turns = [
        Reply(
            text="I think \\boxed{70}; let me verify.",
            tool_calls=[{"name": "code_interpreter", "arguments": {"code": "print(70)"}}],
        ),  # noqa: E501
        "Verified: \\boxed{70}",
    ]
    with OpenAITestServer(ServerConfig(script=ScriptedToolModel(turns, protocol="text"))) as server:
        _, out = run_suite(f"--endpoint={server.url}", *RETOOL)
    assert (_generation(out)["code_calls"], _generation(out)["stop_reason"]) == (1, "answer")


@pytest.mark.parametrize(
    ("tokenize", "cap_chars", "counting"),
    [
        ("vllm", 100, "the server's /tokenize (its chat template and tokenizer)"),
        ("llama", 100, "the server's /extras/tokenize (text; chat framing from server usage)"),
        (
            "llama-server",
            100,
            "the server's /tokenize of text (llama-server; chat framing from server usage)",
        ),
        ("none", 400, "ESTIMATE: 4 characters a token (the server has no tokenize route; pass --tokenizer)"),
    ],
)
def test_tool_output_is_counted_with_the_server_s_tokenizer(run_suite, tokenize, cap_chars, counting) -> None:
    flood = _solve_with_tool("print('x' * 3000)\nprint('tail-marker')")
    with OpenAITestServer(ServerConfig(script=ScriptedToolModel(flood), tokenize=tokenize)) as server:
        _, out = run_suite(f"--endpoint={server.url}", *RETOOL, "--max-tool-response-tokens=100")
        side = server.side_requests
    (problem,), (summary,) = read_results(out)
    tool = problem["generations"][0]["transcript"][1]
    assert tool["truncated"] and tool["output"].startswith("[... truncated ...]\n")
    assert tool["output"].endswith("tail-marker\n") and cap_chars * 0.7 <= len(tool["output"]) <= cap_chars
    assert summary["token_counting"] == {counting: 2}
    assert (side.get("tokenize", 0) > 0) == (tokenize != "none")


BROKEN_SANDBOX = """
from pytest_agenteval.tasks.aime25 import Aime25
from pytest_agenteval.sandbox import ExecutionResult


class BrokenSandbox(Aime25):
    # The sandbox's own failure (its zygote died) cannot be caused on purpose from model
    # code, so this stands in for it: the one fake in these tests.
    async def rollout(self, ctx):
        async def died(code, context, index, auto_print=True):
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
        result = pytester.runpytest_inprocess(
            f"--dataset-path={tiny_aime}", f"--endpoint={server.url}", "--limit=1",
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
    assert "PromptTooLong: the prompt alone is " in problem["error"] and requests == 0


def test_token_in_token_out_over_http_sends_the_sampled_ids_back(run_suite) -> None:
    script = ScriptedToolModel(_solve_with_tool("print(30 + 40)"), protocol="text")
    config = ServerConfig(script=script, tokenize="vllm", log_bodies=True)
    with OpenAITestServer(config) as server:
        result, out = run_suite(
            f"--endpoint={server.url}", "--mode=retool", "--limit=1", "--val-n=1", "--continuation=tokens"
        )
        first, second = sorted(server.requests, key=lambda r: len(r["body"]["prompt_ids"]))
    result.assert_outcomes(passed=1)
    (problem,), (summary,) = read_results(out)
    assert summary["continuation"] == {"tokens": 1}
    assert summary["token_counting"] == {"the server's /tokenize (its chat template and tokenizer)": 1}
    assert first["endpoint"] == "completions" and first["body"]["return_token_ids"] is True
    sampled = problem["generations"][0]["transcript"][0]["content"]
    # the next prompt: the first, the sampled text and its end verbatim, then the tool turn
    assert second["body"]["prompt"] == (
        first["body"]["prompt"] + sampled + "<|im_end|>\n"
        "<|im_start|>user\n<tool_response>\n70\n\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
    assert first["body"]["prompt"].startswith("<|im_start|>system\n<tools>")
