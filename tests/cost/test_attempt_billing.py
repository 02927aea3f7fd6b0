"""The budget settles every HTTP attempt the server may have billed, against the test
server over real sockets: the samples of a server that ignores `n` (sent as more
requests), a reply cut short after the server generated it (billed, then retried), and
the prompt's reservation as an upper bound of what the server counts."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from pytest_agenteval.api.sampler import SamplingParams
from pytest_agenteval.models.backends.openai import OpenAISampler
from pytest_agenteval.models.cost.budget import BudgetedSampler, BudgetLedger, Limits
from pytest_agenteval.models.http.retry import RetryPolicy
from pytest_agenteval.testing import AsyncOpenAITestServer, FaultContext, ServerConfig

MESSAGES = [{"role": "user", "content": "What is 6 x 7? Think it through."}]
PARAMS = SamplingParams(temperature=0.0, top_p=1.0, top_k=0, max_tokens=50, seed=3)


@contextlib.asynccontextmanager
async def _budgeted(tmp_path: Path, config: ServerConfig, stream: bool = True):
    """The test server, an OpenAISampler on it (no backoff) under a ledger of 100,000 tokens."""
    async with AsyncOpenAITestServer(config) as server:
        sampler = OpenAISampler(
            [server.url], "mock-model", stream=stream, retry=RetryPolicy(base_delay_s=0.0)
        )
        ledger = BudgetLedger.create(Limits(max_total_tokens=100_000), tmp_path)
        try:
            yield server, sampler, BudgetedSampler(sampler, ledger, None), ledger
        finally:
            await sampler.aclose()


async def _complete_n(tmp_path: Path, config: ServerConfig, n: int, stream: bool = True):
    async with _budgeted(tmp_path, config, stream) as (server, _, budgeted, ledger):
        completions = await budgeted.complete_n(MESSAGES, PARAMS, n)
        return completions, server.requests, ledger.state()


def test_every_request_of_an_n_fallback_is_settled(tmp_path: Path) -> None:
    """A server that ignores `n`: the 3 samples it left out go as 3 more requests, and the
    ledger counts all 4 (it counted the first only: 4 x the tokens, 1 x charged)."""
    config = ServerConfig(support_n=False, answer="It is \\boxed{42}.")
    completions, requests, state = asyncio.run(_complete_n(tmp_path, config, 4))
    assert len(completions) == 4 and len(requests) == 4
    used = sum(c.prompt_tokens + (c.completion_tokens or 0) for c in completions)
    assert state.spent_tokens == used


def test_usage_is_summed_over_every_completion_of_a_request_of_n(tmp_path: Path) -> None:
    config = ServerConfig(answer="It is \\boxed{42}.")
    completions, requests, state = asyncio.run(_complete_n(tmp_path, config, 3, stream=False))
    assert len(requests) == 1
    usage = completions[0].request_usage
    assert state.spent_tokens == usage["prompt_tokens"] + usage["completion_tokens"]
    assert state.requests == 1


def _first_cut_short(context: FaultContext) -> str | None:
    return "truncated" if context.attempt == 0 else None


def test_an_attempt_cut_short_after_generation_is_settled_at_its_worst_case(tmp_path: Path) -> None:
    """The server generated the first reply and the client never read it whole: the
    provider bills it, so the ledger settles it at its reservation (it released it)."""
    config = ServerConfig(answer="It is \\boxed{42}.", fault_plan=_first_cut_short)
    (completion,), requests, state = asyncio.run(_complete_n(tmp_path, config, 1, stream=False))
    assert [r["outcome"] for r in requests] == ["truncated", "ok"]
    used = completion.prompt_tokens + (completion.completion_tokens or 0)
    assert state.requests == 2  # two attempts settled
    assert state.spent_tokens >= used + PARAMS.max_tokens  # the cut one: at least its max_tokens


def _first_refused(context: FaultContext) -> str | None:
    return "429" if context.attempt == 0 else None


def test_a_429_before_any_body_is_released(tmp_path: Path) -> None:
    config = ServerConfig(answer="It is \\boxed{42}.", fault_plan=_first_refused, retry_after="0")
    (completion,), requests, state = asyncio.run(_complete_n(tmp_path, config, 1, stream=False))
    assert [r["outcome"] for r in requests] == ["429", "ok"]
    assert state.spent_tokens == completion.prompt_tokens + (completion.completion_tokens or 0)
    assert state.requests == 1


def _second_prompt_reset_once(context: FaultContext) -> str | None:
    text = str(context.body["messages"][-1]["content"])
    return "reset" if context.attempt == 0 and text.startswith("Second") else None


def test_a_kept_alive_connection_lost_after_generation_is_an_attempt_of_its_own(tmp_path: Path) -> None:
    """The server generated the second request's reply (and billed it) on the kept-alive
    connection, then the connection went: before, the client sent it again silently inside
    the one reservation (3 generations billed, 2 attempts settled)."""
    config = ServerConfig(
        answer="It is \\boxed{42}.", billing=True, latency_ms=250, fault_plan=_second_prompt_reset_once
    )

    async def two_requests():
        async with _budgeted(tmp_path, config, stream=False) as (server, sampler, budgeted, ledger):
            for prompt in ("First: what is 6 x 7?", "Second: what is 6 x 8?"):
                await budgeted.complete([{"role": "user", "content": prompt}], PARAMS)
            return server.requests, server.billed, ledger.state(), sampler.stats()

    requests, billed, state, stats = asyncio.run(two_requests())
    assert [r["outcome"] for r in requests] == ["ok", "reset", "ok"]
    assert state.requests == billed["generations"] == 3
    assert state.spent_tokens >= billed["prompt_tokens"] + billed["completion_tokens"]
    assert stats.get("stale_connection_retries", 0) == 0 and stats["retry_connection"] == 1


@pytest.mark.parametrize(
    ("fault", "settled"),
    [
        ("429", 1),  # turned away before generating: released
        ("503", 1),
        ("500", 2),  # may come after the model generated: settled at its worst case
        ("502", 2),  # a gateway's, after the model behind it generated (the billing server bills it)
        ("504", 2),
    ],
)
def test_which_error_statuses_are_billed(tmp_path: Path, fault: str, settled: int) -> None:
    """Before: every 5xx was released as not billed."""

    def first_fails(context: FaultContext) -> str | None:
        return fault if context.attempt == 0 else None

    config = ServerConfig(answer="It is \\boxed{42}.", billing=True, fault_plan=first_fails, retry_after="0")
    (completion,), requests, state = asyncio.run(_complete_n(tmp_path, config, 1, stream=False))
    assert [r["outcome"] for r in requests] == [fault, "ok"]
    assert state.requests == settled
    used = completion.prompt_tokens + (completion.completion_tokens or 0)
    assert state.spent_tokens == used if settled == 1 else state.spent_tokens >= used + PARAMS.max_tokens
