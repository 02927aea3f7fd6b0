"""Judge calls (the datagen suite's) cost and count against the budget as the run's own
generations do: each judge call records its cost, the summary has a cost per judge, and
a budget stop followed by a rerun pays for no judge call twice (scripted judges on the
OpenAI test server, real sockets)."""

from __future__ import annotations

import pytest

from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import read_results
from tests.datagen import scripted

SUITE = """
from pytest_agenteval.tasks.datagen.suite import Datagen

agenteval_suite = Datagen()


def test_datagen(evaluation):
    evaluation.check()
"""
PRICES = '[models."mock-model"]\ninput = 1.0\noutput = 2.0\n'


@pytest.fixture
def datagen(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_datagen=SUITE)
    (pytester.path / "prices.toml").write_text(PRICES)
    return pytester


def run(pytester: pytest.Pytester, out: str, *args: str) -> tuple[pytest.RunResult, list, list]:
    gen, ref = scripted.write_data(pytester.path)
    result = pytester.runpytest_inprocess(  # no interpreter to start and import: ~0.6 s of CPU
        "-p", "no:cacheprovider", f"--agenteval-out={out}", f"--datagen-path={gen}",
        f"--reference-path={ref}", "--prices=prices.toml", *args,
    )  # fmt: skip
    path = pytester.path / out
    return (result, *read_results(path)) if path.exists() else (result, [], [])


def test_each_judge_call_records_its_cost_and_the_summary_has_each_judges(datagen: pytest.Pytester) -> None:
    with (
        OpenAITestServer(ServerConfig(script=scripted.judge(score=4))) as first,
        OpenAITestServer(ServerConfig(script=scripted.judge(score=3))) as second,
    ):
        args = [f"--judge-endpoint={s.url}" for s in (first, second)] + ["--judge-model=mock-model"]
        result, problems, (summary,) = run(datagen, "r.jsonl", *args)
    result.assert_outcomes(passed=3)
    judgments = [j for p in problems for g in p["generations"] for j in g["judgments"]]
    for judgment in judgments:
        expected = (judgment["prompt_tokens"] * 1.0 + judgment["completion_tokens"] * 2.0) / 1e6
        assert judgment["model"] == "mock-model" and judgment["cost_usd"] == round(expected, 9)
    by_judge = summary["cost"]["by_judge"]
    assert sorted(by_judge) == ["mock-model#1", "mock-model#2"]
    for name, judge in by_judge.items():
        own = [j for j in judgments if j["judge"] == name]
        assert judge["usd"] == round(sum(j["cost_usd"] for j in own), 9)
        assert judge["prompt_tokens"] == sum(j["prompt_tokens"] for j in own) and judge["unpriced"] == 0
    assert summary["cost"]["usd"] == round(sum(j["usd"] for j in by_judge.values()), 9)
    assert summary["cost"]["by_model"]["mock-model"]["usd"] == summary["cost"]["usd"]
    assert "judge mock-model#1: $" in result.stdout.str()


def test_judge_calls_stop_at_the_budget_and_a_rerun_pays_for_none_twice(datagen: pytest.Pytester) -> None:
    with OpenAITestServer(ServerConfig(script=scripted.judge(score=4))) as server:
        args = (f"--judge-endpoint={server.url}", "--judge-model=mock-model", "--max-tokens=100")
        first, problems, (summary,) = run(datagen, "r1.jsonl", *args, "--max-cost=0.0015")
        paid_first = [r["key"] for r in server.requests if r.get("outcome", "ok") == "ok"]
        server.reset()
        second, problems2, (summary2,) = run(datagen, "r2.jsonl", *args, "--max-cost=1")
        paid_second = [r["key"] for r in server.requests]
    stopped = summary["budget"]["stopped_problem_ids"]
    assert stopped and all("BudgetExceeded" in p["error"] for p in problems if p["problem_id"] in stopped)
    assert summary["budget"]["spent_usd"] <= 0.0015
    assert first.ret == pytest.ExitCode.TESTS_FAILED
    # every judge call answered once over both runs: 3 items x (1 pointwise + 2 orders of 1 opponent)
    assert len(set(paid_first)) == len(paid_first) and not set(paid_second) & set(paid_first)
    assert len(paid_first) + len(paid_second) == 9
    assert summary2["complete"] is True and second.ret == pytest.ExitCode.OK
