"""A trio:// sampler (billed in dollars by the service) under a budget: each call of the
SDK is an attempt of its own, settled to what it sampled, or at its worst case when it
timed out after it was sent; against the local PyTRIO service over real sockets. Slower
(~3 s on 2 cores): a 1 s timeout, and the service's SmolLM2 samples."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.config.options import OPTIONS, Settings
from pytest_agenteval.models import SamplingParams
from pytest_agenteval.models.backends.sdk import SdkSampler, close_sessions
from pytest_agenteval.models.backends.sdk_adapters import adapter_for
from pytest_agenteval.models.cost.budget import BudgetedSampler, BudgetLedger, Limits

pytest.importorskip(
    "transformers", reason="the SDK extras are not installed: pip install -e '.[trio,tinker]'"
)

EIGHT = SamplingParams(temperature=0.0, top_p=1.0, top_k=-1, max_tokens=8, seed=0)
MESSAGES = [{"role": "user", "content": "What is 6 x 7?"}]


@pytest.mark.parametrize("protocol", ["trio"], indirect=True)  # tinker:// takes the same path
def test_a_timed_out_sample_call_is_settled_as_an_attempt_of_its_own(
    service: Any, protocol: Any, base_model: str, tmp_path: Path
) -> None:
    """Before: the timed-out call and its retry shared the call's one reservation, settled
    to the retry's usage only (1 attempt; the service had generated for 2)."""
    stalled: list[str] = []

    def stall_once(context: Any) -> str | None:
        if not stalled:
            stalled.append(context.key)
            return "stall"
        return None

    server = service(fault_plan=stall_once, stall_s=30.0)
    values = {o.dest: o.default for o in OPTIONS}
    values.update(
        model_path=protocol.step, base_model=base_model, request_timeout=3.0
    )  # the retry generates within it under load too
    settings = Settings(**values, explicit=frozenset())
    sampler = SdkSampler(adapter_for("trio"), settings, 4, tmp_path / "home")
    ledger = BudgetLedger.create(Limits(max_total_tokens=100_000), tmp_path)

    async def sample() -> Any:
        try:
            return await BudgetedSampler(sampler, ledger, None).complete(MESSAGES, EIGHT)
        finally:
            await sampler.aclose()

    try:
        completion = asyncio.run(sample())
    finally:
        close_sessions()
    outcomes = [entry["outcome"] for entry in server.requests if entry["key"] == stalled[0]]
    assert outcomes[0] == "stall" and outcomes[-1] == "ok"
    state = ledger.state()
    assert state.requests == 2  # the timed-out call, then its retry
    worst = completion.prompt_tokens + EIGHT.max_tokens
    assert state.spent_tokens == worst + completion.prompt_tokens + completion.completion_tokens
    assert state.reservations == {"token ids": 2}
