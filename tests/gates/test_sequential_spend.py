"""What a sequential run sends after its decision and what it says it spent: under
`--concurrency auto` the draws in flight follow the live limit (not --concurrency-max), so
the decision stops the requests within one a slot; the draws finished after the decision
are counted (requests, tokens, cost) beside those the decision used; a cost budget that
refuses the first draw is named in the gate's line and the summary is still written."""

from __future__ import annotations

import pytest

from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import read_results
from tests.gates.test_sequential_mode import GATE, rates, sequential_run


def run_auto(run_suite, *args):
    """A clear pass under --concurrency auto against a server that admits 2 requests at once
    (the live limit drops to 2 or so; --concurrency-max stays at 64)."""
    config = ServerConfig(script=rates(0.9, 0.8, 0.9, 0.7), max_concurrent=2, latency_ms=40)
    with OpenAITestServer(config) as server:
        result, path = run_suite(
            f"--endpoint={server.url}",
            "--val-n=64",
            "--concurrency=auto",
            "--agenteval-sequential",
            f"--agenteval-gate={GATE}",
            *args,
        )
        stats = server.stats()
    return result, path, stats


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one process", "-n 2"])
def test_under_concurrency_auto_the_decision_stops_the_requests_within_one_a_slot(run_suite, workers):
    result, path, stats = run_auto(run_suite, *workers)
    assert result.ret == 0, result.stdout.str()[-3000:]
    _, (summary,) = read_results(path)
    block = summary["sequential"]
    used, finished = block["draws_used"], block["draws_finished"]
    admitted = stats["total_requests"] - stats["rate_limit"]["refused"]  # the server generated these
    endpoints = summary["concurrency"]["endpoints"]
    # the highest live limit each process reached, summed (it starts at 4, 2 a worker with
    # -n 2; the server admits 2 at once); --concurrency-max is 64
    peak = sum(e["peak"] for e in (endpoints.values() if isinstance(endpoints, dict) else endpoints))
    assert peak <= 16
    # past the decision at most the one request each slot had in flight (before: 85 of 22)
    assert finished <= used + peak, (used, finished, peak)
    assert admitted <= used + peak, (used, admitted, peak)


def run_fixed(run_suite, responder, *args, val_n=16):
    """A sequential run whose gates are in `args`: the result and the results path."""
    result, path, _ = sequential_run(run_suite, responder, *args, val_n=val_n, gates=())
    return result, path


def gate_line(result, expression):
    return next(x for x in result.outlines if x.startswith("gate ") and f" {expression}: " in x)


def test_a_cost_stop_says_undecided_only_of_the_gates_that_are(run_suite):
    low, high = "aime25.average_at_n >= 0.05 @ 0.95", GATE
    result, path = run_fixed(
        run_suite,
        rates(0.4, 0.4, 0.4, 0.4),
        f"--agenteval-gate={low}",
        f"--agenteval-gate={high}",
        "--max-tokens=40",
        "--max-total-tokens=1500",
    )
    _, (summary,) = read_results(path)
    block = summary["sequential"]
    assert block["stop"] == "cost" and block["draws_used"] < block["draws_full"], block["reason"]
    decided = gate_line(result, low)
    # before: "... (the cost budget stopped the draws: undecided)" on a PASS
    assert decided.startswith(f"gate PASS {low}: ") and decided.endswith(
        f"(decided; the draws ran on for the other gates: {block['reason']})"
    ), decided
    assert gate_line(result, high).endswith("(the cost budget stopped the draws: undecided)")


def test_a_cost_budget_that_refuses_the_first_draw_is_named_and_the_summary_written(run_suite):
    result, path = run_fixed(
        run_suite, rates(0.9, 0.9, 0.9, 0.9), f"--agenteval-gate={GATE}", "--max-total-tokens=800"
    )
    assert result.ret == 1
    line = gate_line(result, GATE)
    refused = "no draws: the cost budget refused the first one (BudgetExceeded"
    assert line.startswith(f"gate FAIL {GATE}: {refused}")
    assert line.endswith("); gates fail closed"), line
    problems, (summary,) = read_results(path)  # before: no results file at all
    assert summary["sequential"]["stop"] == "cost" and summary["sequential"]["draws_used"] == 0
    assert summary["budget"]["stopped"] is True
    assert [p["error"].split(": ", 1)[1].split(":")[0] for p in problems] == ["BudgetExceeded"]
    assert any(x.startswith("budget: stopped after") for x in result.outlines)


PRICES = '[models."mock-model"]\ninput = 1000\noutput = 1000\nsource = "a test"\ndate = "2026-12-02"\n'


def test_the_draws_after_the_decision_are_counted_and_the_per_problem_figures_are_not_claimed(
    run_suite, tmp_path
):
    prices = tmp_path / "prices.toml"
    prices.write_text(PRICES, encoding="utf-8")
    result, path, stats = run_auto(run_suite, f"--prices={prices}", "--max-cost=50")
    assert result.ret == 0, result.stdout.str()[-3000:]
    problems, (summary,) = read_results(path)
    block = summary["sequential"]
    spent, used = block["spent"], block["draws_used"]
    generations = [g for p in problems for g in p["generations"]]
    assert spent["draws"] == block["draws_finished"] >= used == len(generations)
    admitted = stats["total_requests"] - stats["rate_limit"]["refused"]
    assert spent["attempts"] == stats["total_requests"]  # every request the server saw, 429s included
    assert spent["attempts"] - spent["retries"] == spent["draws"] <= admitted
    assert spent["usd"] == pytest.approx(summary["budget"]["spent_usd"], abs=1e-6)  # the ledger's spending
    assert spent["usd"] >= summary["cost"]["usd"]
    rows = {line.split()[0]: line for line in result.outlines if line.startswith("  ")}
    assert rows["requests"].endswith("cached (the draws the decision used)")
    all_draws = next(x for x in result.outlines if x.startswith("  all draws"))
    assert all_draws.split("  ")[-1].startswith(
        f"{spent['draws']} finished ({used} used): {spent['attempts']} sent, {spent['retries']} retries, "
        f"0 cached; prompt {spent['prompt_tokens']}, completion {spent['completion_tokens']}; $"
    ), all_draws
    # figures over N samples of each problem are not shown from a few draws of each
    why = "n/a (sequential: a problem has only the draws of it, not N samples)"
    for name in ("pass@N", "maj@N", "pass@k"):
        assert rows[name].split(None, 1)[1].strip() == why
    mean = sum(g["correct"] for g in generations) / used
    assert rows["average@N"].split(None, 1)[1].strip() == (
        f"{mean:.3f}  over {used} draws (its interval: the gate's line)"
    )
    assert rows["generations"].split(None, 1)[1].strip() == (
        f"{used} drawn for the decision, of 256 in a full run (N=64)"
    )
