"""What a --batch run costs, through pytest against the test server's Batch API: the
generations this run's batch answered are paid by this run (`via: batch`, not from the
cache) at the batch price (0.5 x the live price where the prices give none); a rerun that
reads them from the cache again reads them as from the cache, still at the batch price."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.models.cost.prices import BATCH_PRICE_RULE
from pytest_agenteval.testing import BatchConfig
from tests.batch.conftest import ANSWERS, DEFAULT_ANSWER
from tests.conftest import TINY_PROBLEMS, read_results

XDIST = [pytest.param((), id="one-process"), pytest.param(("-n", "2"), id="xdist")]
GENERATIONS = len(TINY_PROBLEMS) * 2  # --val-n=2
LIVE = '[models."mock-model"]\ninput = 1.0\noutput = 2.0\nsource = "test"\ndate = "2026-12-02"\n'
WITH_BATCH = LIVE + "batch_input = 0.25\nbatch_output = 0.5\n"


def prices(folder: Path, text: str) -> str:
    path = folder / "prices.toml"
    path.write_text(text)
    return f"--prices={path}"


def generations(out: Path) -> list[dict[str, Any]]:
    problems, _ = read_results(out)
    return [g for p in problems for g in p["generations"]]


def usd(rows: list[dict[str, Any]], input_price: float, output_price: float) -> float:
    """What the rows' tokens cost at these prices (USD per 1M tokens), summed per generation."""
    return round(
        sum(
            round((g["prompt_tokens"] * input_price + g["completion_tokens"] * output_price) / 1e6, 9)
            for g in rows
        ),
        9,
    )


@pytest.mark.parametrize("workers", XDIST)
def test_a_batch_run_pays_for_its_generations_at_half_the_live_price_and_a_rerun_reads_them_from_the_cache(
    pytester: pytest.Pytester, aime_run, agenteval_openai_server_factory, workers
) -> None:
    live_server = agenteval_openai_server_factory(answers=ANSWERS, answer=DEFAULT_ANSWER)
    priced = prices(pytester.path, LIVE)
    aime_run(live_server, priced, *workers, cache="live-cache", out="live.jsonl")
    live_rows = generations(pytester.path / "live.jsonl")
    live_usd = usd(live_rows, 1.0, 2.0)

    server = agenteval_openai_server_factory(
        answers=ANSWERS, answer=DEFAULT_ANSWER, batch=BatchConfig(validating_s=0.05, request_ms=10)
    )
    result, summary = aime_run(server, priced, "--batch", *workers)
    result.assert_outcomes(passed=2, failed=2)
    rows = generations(pytester.path / "r.jsonl")
    batch_id = f"batch-mock{2:06d}"  # the server's first batch (its file is the first id)
    assert [(g["via"], g["batch_id"], g["cached"]) for g in rows] == [
        ("batch", batch_id, False)
    ] * GENERATIONS
    assert [g["cost_usd"] for g in rows] == [round(g["cost_usd"] / 2, 9) for g in live_rows]
    cost = summary["cost"]
    assert cost["usd"] == usd(rows, 0.5, 1.0) == round(live_usd / 2, 9)
    assert (cost["usd_from_cache"], cost["usd_batched"], cost["batched_generations"]) == (0.0, cost["usd"], 8)
    assert cost["batch_price_rule"] == BATCH_PRICE_RULE
    assert summary["requests"]["cached_generations"] == 0
    result.stdout.fnmatch_lines(
        [f"cost aime25: ${cost['usd']:.6f}; ${cost['usd']:.6f} of it through this run's batch (batch price)"]
    )
    assert "of it from the cache" not in result.stdout.str()
    result.stdout.fnmatch_lines(["0 of 8 generations from the cache"])

    again, summary2 = aime_run(server, priced, "--batch", *workers, out="again.jsonl")
    again.assert_outcomes(passed=2, failed=2)
    rows2 = generations(pytester.path / "again.jsonl")
    assert [(g.get("via"), g["batch_id"], g["cached"]) for g in rows2] == [
        (None, batch_id, True)
    ] * GENERATIONS
    cost2 = summary2["cost"]
    assert (cost2["usd"], cost2["usd_from_cache"], cost2["usd_batched"]) == (cost["usd"], cost["usd"], 0.0)
    assert "batch_price_rule" not in cost2
    again.stdout.fnmatch_lines([f"cost aime25: ${cost['usd']:.6f}; ${cost['usd']:.6f} of it from the cache*"])
    assert server.stats()["batch"]["batches_created"] == 1 and server.stats()["total_requests"] == 0


def test_the_batch_prices_a_prices_file_gives_are_the_ones_billed(
    pytester: pytest.Pytester, aime_run, agenteval_openai_server_factory
) -> None:
    server = agenteval_openai_server_factory(answers=ANSWERS, answer=DEFAULT_ANSWER)
    result, summary = aime_run(server, prices(pytester.path, WITH_BATCH), "--batch")
    result.assert_outcomes(passed=2, failed=2)
    rows = generations(pytester.path / "r.jsonl")
    assert summary["cost"]["usd"] == usd(rows, 0.25, 0.5) > 0
    assert summary["cost"]["prices"]["mock-model"]["batch_input"] == 0.25


@pytest.mark.parametrize("workers", XDIST)
def test_an_estimate_through_a_batch_projects_the_batch_price_and_nothing_from_the_cache(
    pytester: pytest.Pytester, aime_run, agenteval_openai_server_factory, workers
) -> None:
    server = agenteval_openai_server_factory(answers=ANSWERS, answer=DEFAULT_ANSWER)
    args = (prices(pytester.path, LIVE), "--batch", "--estimate", "--estimate-sample=2", *workers)
    result, summary = aime_run(server, *args)
    assert result.ret == 0
    rows = generations(pytester.path / "r.jsonl")
    assert len(rows) == 4 and all(g["via"] == "batch" for g in rows)
    assert (summary["cost"]["usd"], summary["cost"]["usd_from_cache"]) == (usd(rows, 0.5, 1.0), 0.0)
    per_item = [round(a["cost_usd"] + b["cost_usd"], 9) for a, b in zip(rows[::2], rows[1::2], strict=True)]
    projected = f"${sum(per_item) / 2 * 4:.6f}"
    result.stdout.fnmatch_lines(
        [
            f"estimate aime25: * {projected}, for all 4 selected items "
            "(the mean of 2 sample items, 0 of them from the cache, x 4)"
        ]
    )
