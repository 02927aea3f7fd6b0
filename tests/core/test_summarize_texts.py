"""A suite's `summarize` gets its records without the texts (the controller keeps them
on disk), unless the suite says it reads them (`summarize_reads_texts = True`)."""

from __future__ import annotations

import pytest

from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import read_results

SUITE = """
from pytest_agenteval.tasks.aime25 import Aime25


class Lengths(Aime25):
    summarize_reads_texts = {reads}

    def summarize(self, records, settings):
        return {{"text_chars": sum(len(g.rollout.text) for r in records for g in r.generations)}}


agenteval_suite = Lengths()


def test_aime25(evaluation):
    evaluation.check()
"""
ANSWER = "It is \\boxed{70}."


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.parametrize("reads", [True, False])
def test_summarize_sees_the_texts_only_when_the_suite_asks(pytester, tiny_aime, workers, reads) -> None:
    pytester.makepyfile(test_lengths=SUITE.format(reads=reads))
    out = pytester.path / "results.jsonl"
    with OpenAITestServer(ServerConfig(answer=ANSWER)) as server:
        pytester.runpytest_inprocess(
            "-p",
            "no:cacheprovider",
            f"--dataset-path={tiny_aime}",
            f"--agenteval-out={out}",
            "--mode=text-only",
            f"--endpoint={server.url}",
            "--val-n=2",
            "-n",
            workers,
        )
    problems, (summary,) = read_results(out)
    texts = [g["text"] for p in problems for g in p["generations"]]
    assert texts == [ANSWER] * 8  # the results file has them either way
    assert summary["text_chars"] == (len(ANSWER) * 8 if reads else 0)


OWN_SUITE = """
from pytest_agenteval import Rollout, Score, Suite
from pytest_agenteval.tasks.aime25 import Aime25


class Mine(Suite):
    name = "mine"

    def load(self, settings):
        return Aime25().load(settings)

    async def rollout(self, ctx):
        messages = [{{"role": "user", "content": ctx.problem.text}}]
        completion = await ctx.sampler.complete(messages, ctx.params())
        return Rollout(text=completion.text, stop_reason="answer", finish_reason=completion.finish_reason)

    def score(self, problem, rollout, settings):
        answer = rollout.text.split("boxed{{")[-1].split("}}")[0]
        return Score(correct=answer == str(problem.reference), answer=answer, formatted=True)
{summarize}

agenteval_suite = Mine()


def test_mine(evaluation):
    evaluation.check()
"""
ADDS_TO_DEFAULT = """
    def summarize(self, records, settings):
        return {**super().summarize(records, settings), "my_metric": 1.0}
"""


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.parametrize("summarize", ["", ADDS_TO_DEFAULT], ids=["default", "super"])
def test_a_plain_suite_gets_the_default_summary_and_may_add_to_it(
    pytester, tiny_aime, workers, summarize
) -> None:
    pytester.makepyfile(test_mine=OWN_SUITE.format(summarize=summarize))
    out = pytester.path / "results.jsonl"
    with OpenAITestServer(ServerConfig(answer=ANSWER)) as server:
        result = pytester.runpytest_inprocess(
            "-p",
            "no:cacheprovider",
            f"--dataset-path={tiny_aime}",
            f"--agenteval-out={out}",
            f"--endpoint={server.url}",
            "--val-n=2",
            "-n",
            workers,
        )
    problems, (summary,) = read_results(out)
    correct = sum(g["correct"] for p in problems for g in p["generations"])
    assert (summary["suite"], summary["generations"], summary["correct_generations"]) == ("mine", 8, correct)
    assert summary["average_at_n"] == correct / 8
    assert summary.get("my_metric") == (1.0 if summarize else None)
    assert result.ret == (0 if correct == 8 else 1)
