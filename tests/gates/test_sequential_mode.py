"""`--agenteval-sequential`: the draw schedule, the decision replayed over ordered draws, and
runs against the test server with a responder right with a set probability per problem: a
clear pass and a clear fail decided in a small share of the full run's requests (the
server's own count), an undecided gate at the threshold, the same with -n 2, and a rerun
decided from the cache with no request."""

from __future__ import annotations

import collections
import os
import subprocess
import sys

import pytest

from pytest_agenteval.api.records import sample_seed
from pytest_agenteval.run.sequential import BUDGET, DECIDED, Decider, GateSpec, pick, schedule
from pytest_agenteval.stats.sequential import first_decision
from pytest_agenteval.testing import BernoulliResponder, OpenAITestServer, ServerConfig
from tests.conftest import TINY_PROBLEMS, read_results

AT_04 = GateSpec("aime25.average_at_n >= 0.4 @ 0.95", ">=", 0.4, 0.05)


def test_the_schedule_picks_problems_from_the_seed_alone_and_counts_their_samples():
    plan = schedule(42, 4, 4000)
    assert plan[:6] == [(pick(42, k, 4), 0) for k in range(1)] + plan[1:6]
    assert [pick(42, k, 4) for k in range(8)] == [p for p, _ in plan[:8]]
    counts = collections.Counter(p for p, _ in plan)
    assert sorted(counts) == [0, 1, 2, 3]
    assert all(900 <= c <= 1100 for c in counts.values())  # uniform: 1000 +- 3.2 sigma
    for position in range(4):  # the j-th draw of a problem is its sample j
        assert [j for p, j in plan if p == position] == list(range(counts[position]))
    assert schedule(42, 4, 10) == plan[:10]  # a prefix: the budget never moves a draw
    assert schedule(43, 4, 10) != plan[:10]


# (draws' verdicts, stop, draws used, decision)
DECISIONS = [
    ([1] * 20, DECIDED, 7, "PASS"),
    ([0] * 20, DECIDED, 13, "FAIL"),
    ([1, 0] * 8, BUDGET, 16, "UNDECIDED"),
]


@pytest.mark.parametrize(("verdicts", "stop", "used", "decision"), DECISIONS)
def test_the_decider_stops_where_the_betting_capital_first_crosses(verdicts, stop, used, decision):
    decider = Decider([AT_04], budget=16).replay({"correct": bool(v)} for v in verdicts)
    assert (decider.stop, decider.used, decider.decision(AT_04)) == (stop, used, decision)
    first, side = first_decision([verdicts[:16]], 0.4, 0.05)  # the capital at the threshold alone
    assert int(first[0]) + 1 == (used if stop == DECIDED else 0)
    assert int(side[0]) == {"PASS": 1, "FAIL": -1, "UNDECIDED": 0}[decision]


def test_a_failed_draw_stops_the_decision_and_a_refused_one_is_the_cost_budget():
    failed = Decider([AT_04], 16).replay(
        [{"correct": True}, {"error": "ServerError: 500"}, {"correct": True}]
    )
    assert (failed.stop, failed.used, failed.error) == ("error", 1, "ServerError: 500")
    refused = Decider([AT_04], 16).replay([{"correct": True}, {"error": "BudgetExceeded: x", "budget": True}])
    assert (refused.stop, refused.used) == ("cost", 1)


def test_the_responder_is_right_at_its_rate_and_the_same_for_the_same_request():
    responder = BernoulliResponder({"30 + 40": ("70", 0.3)})
    right = [responder.right(seed, "What is 30 + 40?") for seed in range(4000)]
    assert 1100 <= sum(right) <= 1300  # 1200 +- 3.5 sigma
    assert right == [responder.right(seed, "What is 30 + 40?") for seed in range(4000)]
    body = {"seed": 7, "messages": [{"role": "user", "content": "What is 30 + 40?"}]}
    assert responder(body).text in ("The answer is \\boxed{70}.", "The answer is \\boxed{-1}.")
    assert not responder.right(1, "another prompt")


def rates(*values: float) -> BernoulliResponder:
    return BernoulliResponder(
        {p["problem"]: (p["answer"], r) for p, r in zip(TINY_PROBLEMS, values, strict=True)}
    )


GATE = "aime25.average_at_n >= 0.4 @ 0.95"
FULL = 4 * 64  # the full run: 4 problems x N = 64


def sequential_run(run_suite, responder, *args, val_n=64, gates=(GATE,), out="results.jsonl"):
    with OpenAITestServer(ServerConfig(script=responder)) as server:
        result, path = run_suite(
            f"--endpoint={server.url}",
            f"--val-n={val_n}",
            "--concurrency=4",
            "--agenteval-sequential",
            *(f"--agenteval-gate={gate}" for gate in gates),
            *args,
            out=out,
        )
        requests = server.stats()["total_requests"]
    return result, path, requests


def check_results(path, decision):
    """The results file replays the decision; each problem line holds its draws."""
    problems, (summary,) = read_results(path)
    block = summary["sequential"]
    draws = [dict(zip(block["draw_fields"], row, strict=True)) for row in block["draws"]]
    ks, used = [d["draw"] for d in draws], block["draws_used"]
    # every draw made, in order: the decision's with no gap; one cancelled at the decision
    # before it was sent (queued behind the slots) was never made and is not listed
    assert ks == sorted(set(ks)) and ks[:used] == list(range(used))
    replayed = Decider([AT_04], block["draws_full"]).replay(draws)
    assert (replayed.used, replayed.decision(AT_04)) == (block["draws_used"], decision)
    used = draws[: block["draws_used"]]
    for draw in used:
        assert draw["seed"] == sample_seed(42, draw["problem"], draw["sample"])
    drawn = collections.Counter(d["problem"] for d in used)
    assert {p["problem_id"]: len(p["generations"]) for p in problems} == dict(drawn)
    assert {p["problem_id"]: p["draws"] for p in problems} == {
        pid: [d["draw"] for d in used if d["problem"] == pid] for pid in drawn
    }
    (gate,) = summary["gates"]
    assert (gate["decision"], gate["draws"], gate["sequential"]) == (decision, block["draws_used"], True)
    return summary, block


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one process", "-n 2"])
@pytest.mark.parametrize(
    ("responder", "decision", "status"),
    [(rates(0.9, 0.8, 0.9, 0.7), "PASS", 0), (rates(0.0, 0.1, 0.0, 0.05), "FAIL", 1)],
    ids=["clear pass", "clear fail"],
)
def test_a_clear_gate_is_decided_in_a_small_share_of_the_requests(
    run_suite, responder, decision, status, workers
):
    result, path, requests = sequential_run(run_suite, responder, *workers)
    assert result.ret == status, result.stdout.str()[-3000:]
    summary, block = check_results(path, decision)
    used = block["draws_used"]
    assert block["stop"] == "decided" and summary["complete"] is True
    # after the decision each of the 4 slots sends at most the one request it had in flight
    assert used <= requests <= used + 4
    assert requests <= FULL // 8
    line = next(x for x in result.outlines if x.startswith("gate "))
    low, high = summary["gates"][0]["interval"]
    mean = summary["gates"][0]["value"]
    saved = f"{1 - used / FULL:.0%}"
    assert line == (
        f"gate {decision} {GATE}: {mean:.2f} [{low:.2f}, {high:.2f}] after {used} of 256 generations "
        f"({saved} not needed)"
    )


def test_a_gate_at_its_threshold_spends_the_budget_undecided(run_suite):
    result, path, requests = sequential_run(run_suite, rates(0.4, 0.4, 0.4, 0.4), val_n=4)
    assert result.ret == 1, result.stdout.str()[-3000:]
    summary, block = check_results(path, "UNDECIDED")
    assert (block["stop"], block["draws_used"], requests) == ("budget", 16, 16)
    assert summary["complete"] is True
    line = next(x for x in result.outlines if x.startswith("gate "))
    assert line.startswith(f"gate UNDECIDED {GATE}: ") and line.endswith(
        "after 16 of 16 generations (the whole budget: undecided)"
    )


def test_a_rerun_decides_from_the_cache_without_a_request(run_suite):
    args = ("--val-n=64", "--concurrency=4", "--agenteval-sequential", f"--agenteval-gate={GATE}")
    with OpenAITestServer(ServerConfig(script=rates(0.9, 0.8, 0.9, 0.7))) as server:
        first, path = run_suite(f"--endpoint={server.url}", *args, out="first.jsonl")
        requests = server.stats()["total_requests"]
        again, again_path = run_suite(f"--endpoint={server.url}", *args, out="again.jsonl")
        again_requests = server.stats()["total_requests"] - requests
    assert (first.ret, again.ret, again_requests) == (0, 0, 0)
    assert requests > 0
    _, (summary,) = read_results(path)
    _, (rerun,) = read_results(again_path)
    used = summary["sequential"]["draws_used"]
    assert rerun["sequential"]["draws_used"] == used
    assert rerun["sequential"]["draws"][:used] == summary["sequential"]["draws"][:used]
    assert rerun["gates"] == summary["gates"]
    assert rerun["requests"]["cached_generations"] == used


def test_undrawn_problems_are_skipped_with_the_reason(run_suite):
    result, path, _ = sequential_run(run_suite, rates(1.0, 1.0, 1.0, 1.0), "-rs")
    problems, (summary,) = read_results(path)
    undrawn = 4 - len(problems)
    assert undrawn >= 1  # 7 draws of 4 problems at seed 42 miss one
    result.assert_outcomes(passed=len(problems), skipped=undrawn)
    result.stdout.fnmatch_lines(["*not drawn: every gate was decided after 7 of 256 draws*"])


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((), "*--agenteval-sequential: it stops when every gate is decided: add one*"),
        (
            ("--agenteval-gate=aime25.average_at_n >= 0.4",),
            "*--agenteval-sequential: 'aime25.average_at_n >= 0.4' has no level*--agenteval-gate-confidence*",
        ),
        (
            ("--agenteval-gate=aime25.pass_at_n >= 0.4 @ 0.9",),
            "*'aime25.pass_at_n >= 0.4 @ 0.9': pass_at_n is not a mean of single draws*",
        ),
        ((f"--agenteval-gate={GATE}", "--agenteval-shard=0/2"), "*--agenteval-shard decides what runs*"),
        (
            ("--agenteval-gate=aime25.pass_at_k.2 >= 0.4 @ 0.9",),
            "*'aime25.pass_at_k.2 >= 0.4 @ 0.9': pass@k needs draws of k samples, which sequential mode does "
            "not make yet*",
        ),
    ],
)
def test_refused_at_start_up(run_suite, args, error):
    with OpenAITestServer(ServerConfig(script=rates(1, 1, 1, 1))) as server:
        result, _ = run_suite(f"--endpoint={server.url}", "--agenteval-sequential", *args)
        assert server.stats()["total_requests"] == 0
    assert result.ret == 4
    result.stderr.fnmatch_lines([error])


def test_a_draw_whose_process_ended_is_lost_not_waited_for(tmp_path):
    """A worker that died after claiming a draw would hold the decision forever: the others
    see that its process is gone and stop there, as at a failed draw."""
    from pytest_agenteval.run.sequential import DrawLog

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    theirs = DrawLog(tmp_path, "aime25")
    theirs.append({"claim": 0, "pid": ended.pid})
    ours = DrawLog(tmp_path, "aime25")
    ours.refresh()
    assert ours.lost(0) == f"LostDraw: the process that drew it (pid {ended.pid}) ended before it finished"
    assert ours.lost(1) is None  # nobody claimed it
    theirs.append({"claim": 1, "pid": os.getpid()})
    ours.refresh()
    assert ours.lost(1) is None  # its process runs
