"""Budgets through pytest against the OpenAI test server (real sockets, it logs every
request): the budget stops the run (the items left are errors whose cause is `budget`,
the finished ones stay in the results and the cache), a rerun with a higher budget sends
only what is missing, with and without xdist; and the start-up errors, one line each."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import read_results, write_jsonl

# problems of different lengths: their prompts, and so their costs, differ
PROBLEMS = [
    {"id": i, "problem": f"What is {i} + {i}? " + "Think. " * i, "answer": str(2 * i)} for i in range(10)
]
PRICES = '[models."mock-model"]\ninput = 1.0\noutput = 2.0\nsource = "test"\ndate = "2026-12-02"\n'
ANSWER = "The answer is \\boxed{7}."
XDIST = pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["no-xdist", "xdist"])


@pytest.fixture
def priced(pytester: pytest.Pytester) -> tuple[Path, Path]:
    prices = pytester.path / "prices.toml"
    prices.write_text(PRICES)
    return write_jsonl(pytester.path / "ten.jsonl", PROBLEMS), prices


def _ok_keys(server: OpenAITestServer) -> set[str]:
    return {r["key"] for r in server.requests if r.get("outcome", "ok") == "ok"}


@XDIST
def test_the_budget_stops_the_run_and_a_rerun_pays_only_for_what_is_missing(
    run_suite, priced: tuple[Path, Path], workers: tuple[str, ...]
) -> None:
    data, prices = priced
    common = ("--model-name=mock-model", f"--prices={prices}", "--val-n=2", "--max-tokens=40", *workers)
    with OpenAITestServer(ServerConfig(answer=ANSWER)) as server:
        first, out = run_suite(
            f"--endpoint={server.url}", *common, "--max-cost=0.0005", data=data, out="r1.jsonl"
        )
        paid_first = _ok_keys(server)
        problems, (summary,) = read_results(out)
        server.reset()
        second, out2 = run_suite(
            f"--endpoint={server.url}", *common, "--max-cost=1", data=data, out="r2.jsonl"
        )
        paid_second = [r["key"] for r in server.requests]
    budget = summary["budget"]
    stopped = [p for p in problems if p["error"]]
    assert stopped and budget["stopped"] is True
    # one line an item, however many of its samples were not sent: the budget reached, or
    # (most of it left) the request's worst case over what is left
    reached = r"budget \$0\.000500 reached \(\$0\.\d{6} spent\)"
    over = (
        r"its worst case \$0\.\d{6} \(max_tokens 40\) exceeds the \$0\.\d{6} left of --max-cost "
        r"\$0\.000500: lower --max-tokens or raise --max-cost"
    )
    assert all(re.fullmatch(f"BudgetExceeded: not sent: (?:{reached}|{over})", p["error"]) for p in stopped)
    assert budget["stopped_problem_ids"] == [p["problem_id"] for p in stopped]
    assert budget["spent_usd"] <= 0.0005 and budget["max_cost_usd"] == 0.0005
    assert budget["spent_usd"] == summary["cost"]["usd"]  # every generation's cost_usd, summed
    finished = sum(len(p["generations"]) for p in problems)
    assert budget["requests"] == finished == len(paid_first)  # each finished generation paid once
    assert first.ret == pytest.ExitCode.TESTS_FAILED
    line = (
        f"budget: stopped after ${budget['spent_usd']:.6f} of $0.000500; {len(stopped)} items not run; "
        "raise --max-cost to go on"
    )
    output = first.stdout.str()
    assert line in output and "generation failed" not in output
    assert output.count("BudgetExceeded") == 0  # no wall of repeated exception text
    # the rerun sends exactly the generations the first run did not finish, nothing twice
    assert len(paid_second) == 20 - finished and not set(paid_second) & paid_first
    problems2, (summary2,) = read_results(out2)
    assert summary2["complete"] is True and summary2["budget"]["stopped"] is False
    assert summary2["requests"]["cached_generations"] == finished
    assert summary2["cost"]["usd_from_cache"] == summary["cost"]["usd"]  # not charged again
    assert summary2["budget"]["spent_usd"] == pytest.approx(summary2["cost"]["usd"] - summary["cost"]["usd"])
    assert second.ret == pytest.ExitCode.TESTS_FAILED  # every answer is wrong: unsolved items


def test_every_generation_records_its_cost_from_its_own_tokens(run_suite, priced: tuple[Path, Path]) -> None:
    data, prices = priced
    with OpenAITestServer(ServerConfig(answer=ANSWER)) as server:
        _, out = run_suite(
            f"--endpoint={server.url}",
            "--model-name=mock-model",
            f"--prices={prices}",
            "--val-n=1",
            data=data,
        )
    problems, (summary,) = read_results(out)
    for problem in problems:
        (generation,) = problem["generations"]
        expected = (generation["prompt_tokens"] * 1.0 + generation["completion_tokens"] * 2.0) / 1e6
        assert generation["cost_usd"] == round(expected, 9)
    model = summary["cost"]["by_model"]["mock-model"]
    assert model["generations"] == 10 and model["unpriced"] == 0
    assert model["prompt_tokens"] == summary["tokens"]["prompt"]
    assert summary["cost"]["usd"] == round(sum(p["generations"][0]["cost_usd"] for p in problems), 9)
    assert summary["cost"]["prices"]["mock-model"]["source"] == "test"


def test_the_token_budget_stops_the_run_without_a_price(run_suite, priced: tuple[Path, Path]) -> None:
    data, _ = priced
    with OpenAITestServer(ServerConfig(answer=ANSWER)) as server:
        result, out = run_suite(
            f"--endpoint={server.url}", "--val-n=1", "--max-tokens=40", "--max-total-tokens=300", data=data
        )
        sent = len(server.requests)
    problems, (summary,) = read_results(out)
    budget = summary["budget"]
    assert budget["spent_tokens"] <= 300 and budget["stopped"] is True
    assert sent == budget["requests"] == sum(len(p["generations"]) for p in problems)
    assert (
        f"budget: stopped after {budget['spent_tokens']} of 300 tokens; {len(budget['stopped_problem_ids'])} "
        "items not run; raise --max-total-tokens to go on"
    ) in result.stdout.str()


def _one_line(result: pytest.RunResult, message: str) -> None:
    output = result.stdout.str() + result.stderr.str()
    assert message in output and "Traceback" not in output, output
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_max_cost_without_a_price_for_the_model_is_one_line_at_start_up(run_suite) -> None:
    with OpenAITestServer() as server:
        result, _ = run_suite(f"--endpoint={server.url}", "--model-name=mock-model", "--max-cost=5")
        assert server.requests == []
    _one_line(
        result,
        "--max-cost $5.000000: no price for the model 'mock-model' (--model-name); add "
        '[models."mock-model"] with input and output (USD per 1M tokens) to a --prices FILE (docs/cost.md)',
    )


def test_max_cost_without_a_price_for_a_judge_is_one_line_at_start_up(
    run_suite, priced: tuple[Path, Path]
) -> None:
    _, prices = priced
    args = (
        "--model-name=mock-model",
        f"--prices={prices}",
        "--max-cost=5",
        "--judge-endpoint=http://127.0.0.1:9/v1",
    )
    result, _ = run_suite("--endpoint=http://127.0.0.1:9/v1", *args, "--judge-model=judge-x")
    _one_line(
        result,
        "--max-cost $5.000000: no price for the model 'judge-x' (--judge-model); add [models.\"judge-x\"]",
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--max-cost=0",), "--max-cost must be > 0 USD, got $0.000000"),
        (("--max-total-tokens=0",), "--max-total-tokens must be >= 1, got 0"),
        (("--estimate-sample=0",), "--estimate-sample must be >= 1, got 0"),
        (
            ("--prices=missing.toml",),
            "--prices missing.toml: no such file; give a TOML file of prices (docs/cost.md)",
        ),
    ],
)
def test_bad_cost_options_are_one_line_at_start_up(run_suite, args: tuple[str, ...], message: str) -> None:
    result, _ = run_suite("--model-path=replay:nothing.jsonl", *args)
    _one_line(result, message)


def test_a_bad_prices_file_is_one_line_at_start_up(run_suite, pytester: pytest.Pytester) -> None:
    (pytester.path / "p.toml").write_text('[models."m"]\ninput = 1\n')
    result, _ = run_suite("--model-path=replay:nothing.jsonl", "--prices=p.toml")
    _one_line(result, '--prices p.toml: [models."m"] has no output price; add output = USD per 1M tokens')


def test_the_results_summary_is_json_with_the_cost_block(run_suite, priced: tuple[Path, Path]) -> None:
    data, prices = priced
    with OpenAITestServer(ServerConfig(answer=ANSWER)) as server:
        _, out = run_suite(
            f"--endpoint={server.url}", "--model-name=mock-model", f"--prices={prices}", data=data
        )
    summary = json.loads(out.read_text().splitlines()[-1])
    assert set(summary["cost"]) == {
        "billed_as",
        "usd",
        "usd_from_cache",
        "batched_generations",
        "usd_batched",
        "by_model",
        "by_judge",
        "prices",
    }
    assert "budget" not in summary  # no budget given


def test_a_budget_with_a_remote_worker_is_one_line_at_start_up(run_suite) -> None:
    with OpenAITestServer() as server:
        result, _ = run_suite(
            f"--endpoint={server.url}",
            "--max-total-tokens=500",
            "--tx",
            "ssh=eval@gpu-2//python=python3",
            "--dist=load",
        )
        assert server.requests == []
    _one_line(
        result,
        "--max-cost/--max-total-tokens: the budget's ledger is a file on this machine, which the remote "
        "worker --tx ssh=eval@gpu-2//python=python3 cannot share; "
        "run a budgeted run's workers on one machine",
    )
