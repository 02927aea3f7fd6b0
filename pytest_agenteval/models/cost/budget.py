"""The run's budget (`--max-cost`, `--max-total-tokens`), checked before every request.

Every process of the run on one machine (xdist workers, the judges of each) shares one
ledger: a small JSON file the controller creates, read and rewritten under an exclusive
`fcntl.flock`, so two workers cannot both spend the last dollar. A request reserves its
worst case before it is sent: its prompt tokens (estimated, ~4 characters a token, as no
tokenizer is at hand before sending) plus `max_tokens` for each sample it asks for, because
what a request costs is only known once it is answered, and with many requests in flight
the answers arrive too late to stop the ones that would overrun. The reply settles the
reservation to its real usage. A request is refused (`BudgetExceeded`, never sent) when
the money already spent and its own worst case exceed the budget; when only the other
requests' reservations stand in the way, it waits for them to settle instead.

The budget sits under the generation cache: a cache hit never reaches it, costs nothing
and is not charged, so a rerun with a higher budget pays only for what is missing."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agenteval.api.sampler import Completion, Message, SamplerError, SamplingParams
from pytest_agenteval.models.cost.prices import Price, format_usd

WAIT_S = 0.05  # how often a request blocked only by others' reservations looks again
LEDGER_NAME = "ledger.json"


class BudgetExceeded(SamplerError):
    """The next request could take the run past its budget: it was not sent. Its item is
    an error whose cause is `budget` (not a wrong answer)."""


@dataclass(frozen=True)
class Limits:
    max_cost_usd: float | None = None
    max_total_tokens: int | None = None

    @property
    def any(self) -> bool:
        return self.max_cost_usd is not None or self.max_total_tokens is not None


@dataclass(frozen=True)
class Reservation:
    """A request's worst case, held in the ledger until it is settled or released."""

    tokens: int
    usd: float


@dataclass(frozen=True)
class LedgerState:
    spent_usd: float
    spent_tokens: int
    requests: int  # settled (sent and answered)
    refused: int  # not sent: the budget could not take them


def _empty() -> dict[str, Any]:
    return {"spent_usd": 0.0, "spent_tokens": 0, "requests": 0, "refused": 0, "reserved": {}}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class BudgetLedger:
    """The shared ledger file of one run (see the module's docstring)."""

    def __init__(self, path: Path, limits: Limits) -> None:
        self.path = Path(path)
        self.limits = limits

    @classmethod
    def create(cls, limits: Limits, directory: Path | None = None) -> BudgetLedger:
        """A fresh ledger in a new private folder (under $TMPDIR unless `directory`)."""
        folder = Path(tempfile.mkdtemp(prefix="agenteval-budget-", dir=directory))
        path = folder / LEDGER_NAME
        path.write_text(json.dumps(_empty()), encoding="utf-8")
        return cls(path, limits)

    def _update(self, change: Callable[[dict[str, Any]], Any]) -> Any:
        """Read, change and write the ledger under an exclusive lock; `change`'s result."""
        import fcntl  # POSIX only: imported here so that the plugin imports without it

        with self.path.open("r+", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                text = handle.read()
                data = json.loads(text) if text.strip() else _empty()
                result = change(data)
                # padded over the old text, never truncated: a truncate costs ~2 ms here
                # (measured: benchmarks/budget_overhead.py), trailing blanks cost JSON nothing
                handle.seek(0)
                handle.write(json.dumps(data).ljust(len(text)))
                handle.flush()
                return result
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _over(self, data: Mapping[str, Any], tokens: int, usd: float, reserved: bool) -> str | None:
        """Which limit `tokens`/`usd` more would pass (with the reservations: `reserved`)."""
        held = data["reserved"].values() if reserved else ()
        extra_tokens, extra_usd = sum(r[0] for r in held), sum(r[1] for r in held)
        limit_usd, limit_tokens = self.limits.max_cost_usd, self.limits.max_total_tokens
        if limit_usd is not None and data["spent_usd"] + extra_usd + usd > limit_usd + 1e-12:
            return "cost"
        if limit_tokens is not None and data["spent_tokens"] + extra_tokens + tokens > limit_tokens:
            return "tokens"
        return None

    def try_reserve(self, tokens: int, usd: float) -> Reservation | None:
        """A reservation, or None when other requests' reservations must settle first.
        Raises BudgetExceeded when the request cannot fit even then. The ledger keeps one
        sum of reservations per process, so its file stays a few lines long."""
        me = str(os.getpid())

        def change(data: dict[str, Any]) -> str | None:
            reserved = data["reserved"]
            for pid in [p for p in reserved if p != me and not _alive(int(p))]:
                del reserved[pid]  # a crashed process's reservations never settle
            refused = self._over(data, tokens, usd, reserved=False)
            if refused is not None:
                data["refused"] += 1
                return refused
            if self._over(data, tokens, usd, reserved=True) is not None:
                return "wait"
            held = reserved.setdefault(me, [0, 0.0])
            held[0], held[1] = held[0] + tokens, held[1] + usd
            return None

        result = self._update(change)
        if result == "wait":
            return None
        if result is not None:
            raise BudgetExceeded(self._refusal(result, tokens, usd))
        return Reservation(tokens, usd)

    def _refusal(self, which: str, tokens: int, usd: float) -> str:
        state = self.state()
        if which == "cost":
            return (
                f"budget: not sent: this request could cost up to {format_usd(usd)}, and "
                f"{format_usd(state.spent_usd)} of --max-cost {format_usd(self.limits.max_cost_usd)} "
                "is spent; raise --max-cost to go on"
            )
        return (
            f"budget: not sent: this request could take up to {tokens} tokens, and {state.spent_tokens} of "
            f"--max-total-tokens {self.limits.max_total_tokens} are spent; raise --max-total-tokens to go on"
        )

    async def reserve(self, tokens: int, usd: float) -> Reservation:
        while True:
            reservation = self.try_reserve(tokens, usd)
            if reservation is not None:
                return reservation
            await asyncio.sleep(WAIT_S)

    @staticmethod
    def _drop(data: dict[str, Any], reservation: Reservation) -> None:
        me = str(os.getpid())
        held = data["reserved"].get(me)
        if held is None:
            return
        held[0], held[1] = held[0] - reservation.tokens, round(held[1] - reservation.usd, 12)
        if held[0] <= 0:
            del data["reserved"][me]

    def settle(self, reservation: Reservation, tokens: int, usd: float) -> None:
        """Replace a reservation by what the request really used."""

        def change(data: dict[str, Any]) -> None:
            self._drop(data, reservation)
            data["spent_tokens"] += int(tokens)
            data["spent_usd"] = round(data["spent_usd"] + usd, 9)
            data["requests"] += 1

        self._update(change)

    def release(self, reservation: Reservation) -> None:
        """Drop a reservation whose request failed (nothing was billed)."""
        self._update(lambda data: self._drop(data, reservation))

    def state(self) -> LedgerState:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError):
            data = {}
        return LedgerState(
            spent_usd=float(data.get("spent_usd", 0.0)),
            spent_tokens=int(data.get("spent_tokens", 0)),
            requests=int(data.get("requests", 0)),
            refused=int(data.get("refused", 0)),
        )

    def remove(self) -> None:
        for path in (self.path, self.path.parent):
            try:
                path.unlink() if path.is_file() else path.rmdir()
            except OSError:
                pass


def prompt_estimate(messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None = None) -> int:
    """A request's prompt tokens before it is sent: ~4 characters a token over the
    messages' contents, plus 4 a message for the chat template's framing, plus the tools'
    JSON (what the server renders into the prompt)."""
    chars = 0
    for message in messages:
        content = message.get("content")
        chars += len(content if isinstance(content, str) else json.dumps(content or "", default=str))
        if message.get("tool_calls"):
            chars += len(json.dumps(message["tool_calls"], default=str))
    if tools:
        chars += len(json.dumps(list(tools), default=str))
    return (chars + 3) // 4 + 4 * len(messages)


def usage_of(completions: Sequence[Completion]) -> tuple[int, int, int]:
    """(prompt, completion, cached prompt) tokens one request used, as its reply said."""
    first = completions[0]
    if first.request_usage:  # one of several samples of one request: the request's one total
        usage = first.request_usage
        return (
            int(usage.get("prompt_tokens", 0)),
            int(usage.get("completion_tokens", 0)),
            int(usage.get("cached_prompt_tokens", 0)),
        )
    return first.prompt_tokens, int(first.completion_tokens or 0), first.cached_prompt_tokens


class BudgetedSampler:
    """Wraps a sampler (under the generation cache): every request reserves its worst
    case in the ledger first, and settles to its real usage after. `price`: the model's
    (None: its tokens count, its dollars do not: a local model, or no --max-cost)."""

    def __init__(self, inner: Any, ledger: BudgetLedger, price: Price | None) -> None:
        self.inner = inner
        self.ledger = ledger
        self.price = price

    def __getattr__(self, name: str) -> Any:  # identity, native_tools, supports_n, counter, ...
        return getattr(self.inner, name)

    def _usd(self, prompt: int, completion: int, cached: int = 0) -> float:
        return self.price.cost(prompt, completion, cached) if self.price is not None else 0.0

    async def _guarded(self, prompt: int, completion: int, send: Callable[[], Awaitable[Any]]) -> Any:
        reservation = await self.ledger.reserve(prompt + completion, self._usd(prompt, completion))
        try:
            result = await send()
        except BaseException:
            self.ledger.release(reservation)  # refused, failed or cancelled: not billed
            raise
        completions = result if isinstance(result, list) else [result]
        used_prompt, used_completion, cached = usage_of(completions)
        self.ledger.settle(
            reservation, used_prompt + used_completion, self._usd(used_prompt, used_completion, cached)
        )
        return result

    async def complete(
        self,
        messages: Sequence[Message],
        params: SamplingParams,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | None = None,
    ) -> Completion:
        extra = {"tool_choice": tool_choice} if tool_choice else {}
        return await self._guarded(
            prompt_estimate(messages, tools),
            params.max_tokens,
            lambda: self.inner.complete(messages, params, tools, **extra),
        )

    async def complete_n(
        self, messages: Sequence[Message], params: SamplingParams, n: int
    ) -> list[Completion]:
        return await self._guarded(
            prompt_estimate(messages),
            n * params.max_tokens,
            lambda: self.inner.complete_n(messages, params, n),
        )

    async def complete_tokens(self, prompt: Sequence[int], params: SamplingParams) -> Completion:
        return await self._guarded(
            len(prompt), params.max_tokens, lambda: self.inner.complete_tokens(prompt, params)
        )


@dataclass(frozen=True)
class RunBudget:
    """This process's side of the run's budget: the shared ledger and the prices."""

    ledger: BudgetLedger
    prices: Mapping[str, Price]

    def wrap(self, sampler: Any, model_name: str | None) -> BudgetedSampler:
        """`sampler` behind the budget, its dollars priced by `model_name` (None: a model
        billed in device time, whose tokens alone count)."""
        return BudgetedSampler(sampler, self.ledger, self.prices.get(model_name) if model_name else None)
