"""--batch on the datagen suite: its judge calls are not batched yet; the run says so at
start-up and judges live, sending what a run without --batch sends, with the same verdicts."""

from __future__ import annotations

import pytest

from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.datagen import scripted
from tests.suites.test_datagen_suite import SUITE, judges, run

WARNING = "*WARNING: --batch does not batch datagen's judge calls yet: they are sent live"


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one-process", "xdist"])
def test_datagen_with_batch_says_its_judge_calls_stay_live(pytester: pytest.Pytester, workers) -> None:
    pytester.makepyfile(test_datagen=SUITE)
    summaries, stats = [], []
    for batch in ((), ("--batch",)):
        with OpenAITestServer(ServerConfig(script=scripted.judge(score=4, label="A>B"))) as server:
            own = (f"--endpoint={server.url}", "--model-name=mock-model", "--model-revision=test")
            cache = f"--agenteval-cache-dir={pytester.path / f'cache{len(batch)}'}"
            result, (_, (summary,)) = run(pytester, *own, *judges(server), cache, *batch, *workers)
            stats.append(server.stats())
        result.assert_outcomes(passed=3)
        summaries.append(summary)
    result.stdout.fnmatch_lines([WARNING])
    assert stats[1]["batch"]["batches_created"] == 0
    assert stats[1]["total_requests"] == stats[0]["total_requests"]
    assert summaries[1]["judge"] == summaries[0]["judge"]
    assert summaries[1]["judge"]["mean_score"] == 4.0
