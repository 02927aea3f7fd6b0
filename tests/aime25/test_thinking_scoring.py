"""AIME with a reasoning model over real sockets: the test server writes think blocks (closed,
cut off by max_tokens inside them, a \\boxed{} in the thoughts), and the plugin scores only
the answer, records reasoning and answer apart, counts thinking_truncated on its own line
and warns when the token budget decided the score (docs/reasoning.md)."""

from __future__ import annotations

import pytest

from pytest_agenteval.testing import OpenAITestServer, Reply, ScriptedToolModel, ServerConfig
from tests.conftest import read_results

# --max-tokens 16: the test server cuts a reply at 64 characters, with finish "length"
THINKING = {
    # a wrong guess in the thoughts, the right answer after them
    "30 + 40": "<think>\nmaybe \\boxed{71}\n</think>\n\\boxed{70}",
    # the right answer in thoughts the budget cuts off: scored before, thinking_truncated now
    "12 * 49": "<think>\nIt is \\boxed{588}, but I should check it once more, digit by digit."
    "</think>\\boxed{588}",
    # the right answer in the thoughts, a wrong one after
    "power 4": "<think>\\boxed{16}</think>\\boxed{15}",
    "29 triangles": "\\boxed{87}",  # no reasoning at all
}


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_text_only_scores_the_answer_and_counts_thinking_truncated(run_suite, workers) -> None:
    with OpenAITestServer(ServerConfig(answers=THINKING)) as server:
        result, out = run_suite(f"--endpoint={server.url}", "--val-n=2", "--max-tokens=16", *workers)
    result.assert_outcomes(passed=2, failed=2)
    problems, (summary,) = read_results(out)
    assert [p["num_correct"] for p in problems] == [2, 0, 0, 2]
    first, truncated, wrong, plain = (p["generations"][0] for p in problems)
    assert {
        k: first[k]
        for k in ("text", "reasoning", "reasoning_tokens", "reasoning_tokens_estimated", "answer_tokens")
    } == {
        "text": "\n\\boxed{70}",
        "reasoning": "\nmaybe \\boxed{71}\n",
        # the test server does not say: the sampler's estimate (the reasoning's share of the
        # characters of 11 completion tokens), marked as one
        "reasoning_tokens": 7,
        "reasoning_tokens_estimated": True,
        "answer_tokens": 4,
    }
    assert first["stop_reason"] == "answer"
    assert {k: truncated[k] for k in ("text", "correct", "formatted", "stop_reason", "finish_reason")} == {
        "text": "",
        "correct": False,
        "formatted": False,
        "stop_reason": "thinking_truncated",
        "finish_reason": "length",
    }
    assert truncated["reasoning"] == THINKING["12 * 49"][len("<think>") : 4 * 16]  # the 64 characters sent
    assert truncated["answer_tokens"] == 0
    assert (wrong["predicted_answer"], wrong["reasoning"]) == ("15", "\\boxed{16}")
    assert "reasoning" not in plain and "answer_tokens" not in plain  # a line without reasoning is as before
    assert summary["length"] == {
        "generations": 8,
        "reasoning_generations": 6,
        "max_tokens": 16,
        "hit_max_tokens": 2,
        "hit_max_tokens_share": 0.25,
        "thinking_truncated": 2,
        "thinking_truncated_share": 0.25,
        # the reasoned generations' split is the sampler's estimate (the test server does not
        # report reasoning tokens); the truncated ones are all reasoning
        "reasoning_tokens": 54,
        "answer_tokens": 24,
        "answer_tokens_unknown": 0,
        "reasoning_tokens_estimated": 4,
        "warn_share": 0.1,
        "warning": "25% of generations hit max_tokens (16): the budget, not the model, decided the score; "
        "raise --max-tokens",
    }
    result.stdout.fnmatch_lines(
        [
            "aime25",
            "  WARNING: 25% of generations hit max_tokens (16): the budget, not the model, decided the "
            "score; raise --max-tokens",
            "*thinking truncated*2 of 8 generations (25.0%): reasoning never closed, scored incorrect",
        ]
    )


def test_no_warning_at_or_below_the_threshold(run_suite) -> None:
    with OpenAITestServer(ServerConfig(answers=THINKING)) as server:
        result, out = run_suite(
            f"--endpoint={server.url}", "--val-n=1", "--max-tokens=16", "--length-warn-share=0.25"
        )
    _, (summary,) = read_results(out)
    assert (summary["length"]["hit_max_tokens_share"], summary["length"]["warning"]) == (0.25, None)
    assert "hit max_tokens" not in result.stdout.str()


def test_a_share_outside_0_to_1_is_refused_at_start_up(run_suite) -> None:
    result, _ = run_suite("--model-path=replay:none.jsonl", "--length-warn-share=1.5")
    assert result.ret == 4
    assert (
        "--length-warn-share: '1.5' is not a share of the generations: give a number from 0 to 1, e.g. 0.1"
        in result.stderr.str()
    )


RETOOL = ("--mode=retool", "--limit=1", "--val-n=1", "--sandbox-timeout=5")


def test_retool_runs_the_call_after_the_thoughts_and_keeps_each_turn_whole(run_suite) -> None:
    turns = [
        Reply(
            text="<think>\nA guess: \\boxed{71}. Better compute it.\n</think>\nLet me compute.",
            tool_calls=[{"name": "code_interpreter", "arguments": {"code": "print(30 + 40)"}}],
        ),
        lambda observation, body: f"<think>\nThe tool says {observation.strip()}.\n</think>\n\\boxed{{70}}",
    ]
    with OpenAITestServer(ServerConfig(script=ScriptedToolModel(turns), log_bodies=True)) as server:
        result, out = run_suite(f"--endpoint={server.url}", *RETOOL)
        second = max(server.requests, key=lambda r: len(r["body"]["messages"]))
    result.assert_outcomes(passed=1)
    (problem,), _ = read_results(out)
    (generation,) = problem["generations"]
    assert (generation["correct"], generation["code_calls"], generation["reasoning"]) == (
        True,
        1,
        "\nThe tool says 70.\n",
    )
    call, tool, answer = generation["transcript"]
    assert (call["content"].split("\n")[0], call["reasoning"], tool["output"]) == (
        "Let me compute.",
        "\nA guess: \\boxed{71}. Better compute it.\n",
        "70\n",
    )
    assert (answer["content"], answer["reasoning"]) == ("\\boxed{70}", "\nThe tool says 70.\n")
    # the next turn sees the whole turn, its thoughts included, as the lab's token continuation does
    assert second["body"]["messages"][2]["content"].startswith(
        "<think>\nA guess: \\boxed{71}. Better compute it.\n</think>\nLet me compute.\n<tool_call>"
    )


def test_retool_a_tool_call_written_in_the_thoughts_is_not_run(run_suite) -> None:
    planned = (
        "<tool_call>\n<function=code_interpreter>\n<parameter=code>\nprint(1)\n"
        "</parameter>\n</function>\n</tool_call>"
    )
    turns = [f"<think>\nI could call:\n{planned}\nNo need.\n</think>\n\\boxed{{70}}"]
    with OpenAITestServer(ServerConfig(script=ScriptedToolModel(turns, protocol="text"))) as server:
        result, out = run_suite(f"--endpoint={server.url}", *RETOOL)
    result.assert_outcomes(passed=1)
    (problem,), _ = read_results(out)
    (generation,) = problem["generations"]
    assert (generation["stop_reason"], generation["code_calls"], generation["text"]) == (
        "answer",
        0,
        "\\boxed{70}",
    )


def test_retool_a_turn_cut_off_in_its_thoughts_ends_the_rollout_truncated(run_suite) -> None:
    turns = [
        "<think>\nIt is \\boxed{70} surely, but let me verify this with the interpreter "
        "first, as the lab says"
    ]
    with OpenAITestServer(ServerConfig(script=ScriptedToolModel(turns))) as server:
        result, out = run_suite(f"--endpoint={server.url}", *RETOOL, "--max-assistant-tokens=16")
    result.assert_outcomes(failed=1)
    (problem,), (summary,) = read_results(out)
    (generation,) = problem["generations"]
    assert (generation["correct"], generation["stop_reason"], generation["turns"], generation["text"]) == (
        False,
        "thinking_truncated",
        1,
        "",
    )
    assert summary["length"]["warning"] == (
        "100% of generations hit max_tokens (16): the budget, not the model, decided the score; "
        "raise --max-assistant-tokens"
    )
