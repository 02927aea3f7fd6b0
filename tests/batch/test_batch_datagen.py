"""--batch on the datagen suite: the judge calls go out in a batch, except the probes that
negotiate each judge's structured-output mode (sent live, once per kind); the verdicts are
a live run's and no call is paid twice."""

from __future__ import annotations

import pytest

from pytest_agenteval.testing import BatchConfig, OpenAITestServer, ServerConfig
from tests.conftest import read_results
from tests.datagen import scripted
from tests.suites.test_datagen_suite import SUITE, judges

PROBES = 2  # one per kind (pointwise, pairwise): the first json_schema call, answered
JUDGE_CALLS = 9  # 3 items x (1 pointwise + 1 opponent x 2 orders)


def run(pytester: pytest.Pytester, *args: str):
    """The datagen suite in this process (no interpreter to start: the -n 2 workers are
    subprocesses anyway), its batches polled every 0.05 s instead of the default 30 s."""
    gen, ref = scripted.write_data(pytester.path, None, [])
    result = pytester.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        "--agenteval-out=r.jsonl",
        f"--datagen-path={gen}",
        f"--reference-path={ref}",
        "--batch-poll-interval=0.05",
        *args,
    )
    return result, read_results(pytester.path / "r.jsonl")


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one-process", "xdist"])
def test_datagen_judge_calls_go_in_a_batch_with_a_live_runs_verdicts(
    pytester: pytest.Pytester, workers
) -> None:
    pytester.makepyfile(test_datagen=SUITE)
    summaries, stats = [], []
    for batch in ((), ("--batch",)):
        script = scripted.judge(score=4, label="A>B")
        with OpenAITestServer(ServerConfig(script=script, batch=BatchConfig(request_ms=5))) as server:
            own = (f"--endpoint={server.url}", "--model-name=mock-model", "--model-revision=test")
            cache = f"--agenteval-cache-dir={pytester.path / f'cache{len(batch)}'}"
            result, (_, (summary,)) = run(pytester, *own, *judges(server), cache, *batch, *workers)
            stats.append(server.stats())
        result.assert_outcomes(passed=3)
        summaries.append(summary)
    assert stats[0]["total_requests"] == JUDGE_CALLS
    assert stats[1]["total_requests"] == PROBES
    assert stats[1]["batch"]["batches_created"] == 1
    assert stats[1]["batch"]["requests_answered"] == JUDGE_CALLS - PROBES
    assert summaries[1]["judge"] == summaries[0]["judge"]
    assert summaries[1]["winrate"] == summaries[0]["winrate"]
    assert summaries[1]["judge"]["mean_score"] == 4.0
