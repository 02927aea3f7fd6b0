"""`--agenteval-sequential --agenteval-compare BASELINE.jsonl`: where the baseline's results
file holds this run's draws (its generations with the seeds this run gives the same
(problem, sample)), the comparison is a betting sequence on the paired differences, this
run's verdict minus the baseline's, decided early; where it does not (another --seed), one
line says so and the comparison is today's paired bootstrap at the end. Against the
package's test server, with responders right at a set rate."""

from __future__ import annotations

import pytest

from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import read_results
from tests.gates.test_sequential_mode import GATE, rates


def baseline_run(run_suite, responder, *args):
    """A full run (N = 16) whose generations are the baseline."""
    with OpenAITestServer(ServerConfig(script=responder)) as server:
        result, path = run_suite(
            f"--endpoint={server.url}", "--val-n=16", "--agenteval-no-cache", *args, out="baseline.jsonl"
        )
    assert result.ret in (0, 1), result.stdout.str()[-2000:]
    return path


def compared_run(run_suite, responder, baseline, *args):
    with OpenAITestServer(ServerConfig(script=responder)) as server:
        result, path = run_suite(
            f"--endpoint={server.url}",
            "--val-n=16",
            "--concurrency=2",
            "--agenteval-no-cache",
            "--agenteval-sequential",
            f"--agenteval-compare={baseline}",
            *args,
        )
        requests = server.stats()["total_requests"]
    return result, path, requests


@pytest.mark.parametrize(
    ("before", "now", "status", "verdict"),
    [
        ((0.9, 0.9, 0.9, 0.9), (0.0, 0.1, 0.0, 0.0), 1, "FAIL"),
        ((0.0, 0.1, 0.0, 0.0), (0.9, 0.9, 0.9, 0.9), 0, "PASS"),
    ],
    ids=["a drop", "a gain"],
)
def test_a_baseline_with_the_draws_is_compared_on_the_same_problem_and_sample(
    run_suite, before, now, status, verdict
):
    baseline = baseline_run(run_suite, rates(*before))
    result, path, requests = compared_run(run_suite, rates(*now), baseline)
    assert result.ret == status, result.stdout.str()[-3000:]
    _, (summary,) = read_results(path)
    block = summary["sequential"]
    assert block["stop"] == "decided" and requests <= block["draws_used"] + 2 < 64
    (entry,) = block["gates"]
    assert entry["gate"] == "aime25.average_at_n >= baseline.average_at_n @ 0.95"
    assert entry["decision"] == verdict
    compare = summary["compare"]
    assert compare["passed"] is (verdict == "PASS") and compare["decided"] is True
    assert compare["shared_problems"] == block["draws_used"]
    # the paired differences, replayed from the two files, give the recorded interval
    from pytest_agenteval.stats.sequential import BettingCS

    problems, _ = read_results(baseline)
    theirs = {(p["problem_id"], g["sample_index"]): g for p in problems for g in p["generations"]}
    diffs = []
    for _draw, problem, sample, seed, correct in block["draws"][: block["draws_used"]]:
        assert theirs[(problem, sample)]["seed"] == seed  # the same sample of the same problem
        diffs.append(int(correct) - int(theirs[(problem, sample)]["correct"]))
    sequence = BettingCS(0.05, bounds=(-1, 1), thresholds=[0.0]).extend(diffs)
    assert compare["ci95"] == [sequence.interval.low, sequence.interval.high]
    line = next(x for x in result.outlines if x.startswith("compare "))
    assert line.startswith(f"compare {verdict}  aime25.average_at_n  (paired draws: ")


def test_a_baseline_without_the_draws_says_so_and_compares_as_today(run_suite):
    baseline = baseline_run(run_suite, rates(0.9, 0.9, 0.9, 0.9), "--seed=7")
    result, path, _ = compared_run(run_suite, rates(0.9, 0.9, 0.9, 0.9), baseline, f"--agenteval-gate={GATE}")
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert (
        f"agenteval: --agenteval-compare {baseline} holds no draws of aime25 with this run's seeds "
        "(--seed 42): compared at the end by the paired bootstrap over the problems drawn, as without "
        "--agenteval-sequential"
    ) in result.errlines
    _, (summary,) = read_results(path)
    assert summary["sequential"]["stop"] == "decided"  # the gate stopped the draws
    assert [g["gate"] for g in summary["sequential"]["gates"]] == [GATE]
    line = next(x for x in result.outlines if x.startswith("compare "))
    assert line.startswith("compare UNDECIDED  aime25.average_at_n  (") and "too few problems" in line


def test_a_baseline_without_the_draws_and_no_gate_is_refused_at_start_up(run_suite):
    """Nothing would decide the draws: before, the whole budget ran with no `sequential`
    block, `generations 16 (N=5)` and a bootstrap over the drawn problems."""
    baseline = baseline_run(run_suite, rates(0.9, 0.9, 0.9, 0.9), "--seed=1")
    result, path, requests = compared_run(run_suite, rates(0.9, 0.9, 0.9, 0.9), baseline)
    assert (result.ret, requests, path.exists()) == (4, 0, False)
    result.stderr.fnmatch_lines(
        [
            f"*--agenteval-sequential: --agenteval-compare {baseline} holds no draws of aime25 with this "
            "run's seeds (--seed 42) and no gate names aime25, so nothing would stop its draws; rerun the "
            "baseline with this --seed, gate the suite, or drop --agenteval-sequential for a full run"
        ]
    )
