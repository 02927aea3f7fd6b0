"""The budget's hook where an HTTP request goes out: every attempt is reserved before it
is sent and settled after, so that the ledger counts what the provider bills.

- An attempt answered with usage is settled to that usage: every completion of it (a
  request of `n` has one total), every request of an `n` fallback (each is an attempt
  of its own).
- An attempt the server may have billed without the usage coming back (a timeout, a
  stall, a reset mid-reply, a reply or stream cut short, a reply that is not JSON) is
  settled at its reservation, the worst case: a provider bills the tokens it generated
  for a client that gave up on them.
- Only an attempt that provably never reached the server's generation is released: a
  refused connection, a 429, 503 or 529 status or a reply saying the server is
  overloaded, a 4xx refusal. A 500, 502, 504 or any other 5xx is settled at its worst
  case: a gateway's 502 or 504 often comes after the model behind it generated.

The hook travels in a context variable: `BudgetedSampler` sets it around a call, the
HTTP sampler (models/backends/openai.py) reads it at each attempt. A sampler that has no
attempts to meter (an in-process model) is budgeted per call instead (budget.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from pytest_agenteval.models.cost.prices import Price
from pytest_agenteval.models.cost.prompt_bound import PromptBound, prompt_bound
from pytest_agenteval.models.http.replies import cached_prompt_tokens

PROMPT_CACHE = 512  # prompt bounds remembered (a retry, an `n` fallback: the same prompt again)


class AttemptMeter:
    """One budgeted sampler's side of the ledger (`ledger`: a budget.BudgetLedger;
    `price`: the model's, None when its dollars do not count)."""

    def __init__(self, ledger: Any, price: Price | None) -> None:
        self.ledger = ledger
        self.price = price
        self._bounds: dict[str, PromptBound] = {}

    def _usd(self, prompt: int, completion: int, cached: int = 0) -> float:
        return self.price.cost(prompt, completion, cached) if self.price is not None else 0.0

    async def bound(self, counter: Any, model: str, body: Mapping[str, Any]) -> PromptBound:
        """The prompt's upper bound for `body` (remembered: the same prompt again costs
        no second /tokenize)."""
        key = json.dumps(
            [body.get("messages"), body.get("tools"), body.get("prompt")], sort_keys=True, default=str
        )
        found = self._bounds.get(key)
        if found is None:
            found = await prompt_bound(counter, model, body)
            if len(self._bounds) >= PROMPT_CACHE:
                self._bounds.pop(next(iter(self._bounds)))
            self._bounds[key] = found
        return found

    async def reserve(self, prompt: PromptBound, body: Mapping[str, Any]) -> Any:
        """Reserve one attempt of `body`: the prompt's bound plus `max_tokens` for each
        sample it asks for. Waits while only others' reservations stand in the way;
        BudgetExceeded (not sent) when the spending and this worst case pass the budget."""
        samples = int(body.get("n") or 1)
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
        completion = samples * max_tokens
        return await self.ledger.reserve(
            prompt.tokens + completion,
            self._usd(prompt.tokens, completion),
            prompt.method,
            f"max_tokens {max_tokens}" if samples == 1 else f"{samples} x max_tokens {max_tokens}",
        )

    def answered(self, hold: Any, usage: Any) -> None:
        """The attempt's reply arrived: settle to its usage, or to the worst case where it
        reported none."""
        if not isinstance(usage, Mapping) or "completion_tokens" not in usage:
            self.ledger.settle_worst(hold)
            return
        prompt = int(usage.get("prompt_tokens") or 0)
        completion = int(usage.get("completion_tokens") or 0)
        cached = cached_prompt_tokens(usage)
        self.ledger.settle(hold, prompt + completion, self._usd(prompt, completion, cached))

    def maybe_billed(self, hold: Any) -> None:
        """No usage came back from an attempt the server may have billed: its worst case."""
        self.ledger.settle_worst(hold)

    def unsent(self, hold: Any) -> None:
        """The attempt provably never reached the server's generation: nothing billed."""
        self.ledger.release(hold)


METER: ContextVar[AttemptMeter | None] = ContextVar("agenteval_attempt_meter", default=None)


def current_meter() -> AttemptMeter | None:
    """The budget's hook for the HTTP attempts of the call under way (None: no budget)."""
    return METER.get()
