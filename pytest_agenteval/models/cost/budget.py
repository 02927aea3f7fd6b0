"""The run's budget (`--max-cost`, `--max-total-tokens`), checked before every request.

Every process of the run (xdist workers, the judges of each) shares one ledger: a small
JSON file the controller creates (or `--budget-ledger FILE`, which the shards of a
cluster run share), read and rewritten under an exclusive `fcntl.flock`, so two workers
cannot both spend the last dollar. A request reserves its worst case before it is sent:
an upper bound of its prompt tokens (models/cost/prompt_bound.py) plus `max_tokens` for
each sample it asks for, because what a request costs is only known once it is answered,
and with many requests in flight the answers arrive too late to stop the ones that would
overrun. An HTTP sampler reserves and settles every attempt where it goes out
(models/cost/meter.py): the reply's usage, or the worst case where the server may have
billed an attempt whose reply never arrived whole. A request is refused (`BudgetExceeded`,
never sent) when the money already spent and its own worst case exceed the budget; when
only the other requests' reservations stand in the way, it waits for them to settle.

The budget sits under the generation cache: a cache hit never reaches it, costs nothing
and is not charged, so a rerun with a higher budget pays only for what is missing."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agenteval.api.sampler import Completion, Message, SamplerError, SamplingParams
from pytest_agenteval.models.cost.meter import METER, AttemptMeter
from pytest_agenteval.models.cost.prices import Price, format_usd
from pytest_agenteval.models.cost.prompt_bound import BYTES, TOKEN_IDS, byte_bound

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
    requests: int  # attempts settled (sent, and answered or possibly billed)
    refused: int  # not sent: the budget could not take them
    # how the prompts were reserved (models/cost/prompt_bound.py): requests by method
    reservations: Mapping[str, int] = dataclasses.field(default_factory=dict)


def _empty() -> dict[str, Any]:
    return {
        "spent_usd": 0.0,
        "spent_tokens": 0,
        "requests": 0,
        "refused": 0,
        "reserved": {},
        "runs": {},  # run id -> [usd, tokens, requests, refused]: each run's (shard's) own share
        "reservations": {},
    }


def _run_entry(data: dict[str, Any], run: str) -> list[Any]:
    return data.setdefault("runs", {}).setdefault(run, [0.0, 0, 0, 0])


class LedgerError(Exception):
    """A --budget-ledger file that cannot serve as the ledger: one line naming the fix."""


def lock_problem(path: Path) -> str | None:
    """Why `path`'s storage has no working `flock` between processes (None: it has): this
    process holds the lock while another process tries it. On NFS without lock support, or a
    FUSE file system that ignores locks, the other process gets it, or flock itself fails."""
    import fcntl
    import subprocess
    import sys

    probe = (
        "import fcntl, sys\n"
        "with open(sys.argv[1], 'a') as f:\n"
        "    try:\n"
        "        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "    except BlockingIOError:\n"
        "        sys.exit(3)\n"
    )
    try:
        with Path(path).open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)  # waits while another shard checks or spends
            try:
                done = subprocess.run(
                    [sys.executable, "-c", probe, str(path)], capture_output=True, timeout=30
                )
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
    except OSError as exc:
        return f"flock failed: {exc.strerror or exc}"
    except subprocess.TimeoutExpired:
        return "a second process waited 30 s for its lock"
    if done.returncode == 0:
        return "a second process was granted the lock this one held"
    if done.returncode != 3:
        last = (done.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1]
        return f"a second process could not try the lock: {last}"
    return None


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

    def __init__(self, path: Path, limits: Limits, run: str = "") -> None:
        self.path = Path(path)
        self.limits = limits
        self.run = run  # this run's (shard's) id: its own share of a shared ledger
        self.shared_path: Path | None = None  # --budget-ledger: the file the shards share

    @classmethod
    def shared(cls, path: Path, limits: Limits, run: str) -> BudgetLedger:
        """`--budget-ledger FILE`: created if missing (empty), else checked to be a ledger;
        its storage must have working locks. LedgerError: one line naming the fix."""
        path = Path(path)
        where = f"--budget-ledger {path}"
        try:
            if not path.parent.is_dir():
                raise LedgerError(
                    f"{where}: no folder {path.parent}; create it (on storage every shard sees)"
                )
            try:
                with path.open("x", encoding="utf-8") as handle:  # only one shard creates it
                    handle.write(json.dumps(_empty()))
            except FileExistsError:
                text = path.read_text(encoding="utf-8")
                try:
                    data = json.loads(text) if text.strip() else _empty()
                except ValueError:
                    data = None
                if not isinstance(data, dict) or "spent_usd" not in data:
                    raise LedgerError(
                        f"{where}: not a budget ledger; give a new file (it is created)"
                    ) from None
        except OSError as exc:
            raise LedgerError(f"{where}: {exc.strerror or exc}; give a file shards can write") from None
        problem = lock_problem(path)
        if problem is not None:
            raise LedgerError(
                f"{where}: its storage has no working file locks ({problem}), so shards could spend the "
                "same dollar twice; put it on storage with flock (NFS with locking, Lustre with "
                "-o flock, a local disk for one machine)"
            )
        ledger = cls(path, limits, run)
        ledger.shared_path = path
        return ledger

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

    def try_reserve(self, tokens: int, usd: float, method: str | None = None) -> Reservation | None:
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
                _run_entry(data, self.run)[3] += 1
                return refused
            if self._over(data, tokens, usd, reserved=True) is not None:
                return "wait"
            held = reserved.setdefault(me, [0, 0.0])
            held[0], held[1] = held[0] + tokens, held[1] + usd
            if method:
                methods = data.setdefault("reservations", {})
                methods[method] = methods.get(method, 0) + 1
            return None

        result = self._update(change)
        if result == "wait":
            return None
        if result is not None:
            raise BudgetExceeded(self._refusal(result, tokens, usd))
        return Reservation(tokens, usd)

    def _refusal(self, which: str, tokens: int, usd: float) -> str:
        """One short line (an item's error; the summary line says how to go on)."""
        state = self.state()
        if which == "cost":
            limit = format_usd(self.limits.max_cost_usd)
            return f"not sent: budget {limit} reached ({format_usd(state.spent_usd)} spent)"
        return f"not sent: budget {self.limits.max_total_tokens} tokens reached ({state.spent_tokens} spent)"

    async def reserve(self, tokens: int, usd: float, method: str | None = None) -> Reservation:
        while True:
            reservation = self.try_reserve(tokens, usd, method)
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
            own = _run_entry(data, self.run)
            own[0], own[1], own[2] = round(own[0] + usd, 9), own[1] + int(tokens), own[2] + 1

        self._update(change)

    def settle_worst(self, reservation: Reservation) -> None:
        """Settle a reservation at itself: an attempt the server may have billed whose
        usage never came back (a timeout, a reset, a reply cut short)."""
        self.settle(reservation, reservation.tokens, reservation.usd)

    def release(self, reservation: Reservation) -> None:
        """Drop a reservation whose request provably never reached the server."""
        self._update(lambda data: self._drop(data, reservation))

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError):
            data = {}
        return data if isinstance(data, dict) else {}

    def state(self) -> LedgerState:
        """The ledger's totals: every run (shard) that drew on it."""
        data = self._read()
        return LedgerState(
            spent_usd=float(data.get("spent_usd", 0.0)),
            spent_tokens=int(data.get("spent_tokens", 0)),
            requests=int(data.get("requests", 0)),
            refused=int(data.get("refused", 0)),
            reservations=dict(data.get("reservations") or {}),
        )

    def run_state(self) -> LedgerState:
        """This run's (shard's) own share of the ledger."""
        data = self._read()
        usd, tokens, requests, refused = (data.get("runs") or {}).get(self.run, [0.0, 0, 0, 0])
        return LedgerState(
            float(usd), int(tokens), int(requests), int(refused), dict(data.get("reservations") or {})
        )

    def remove(self) -> None:
        for path in (self.path, self.path.parent):
            try:
                path.unlink() if path.is_file() else path.rmdir()
            except OSError:
                pass


def usage_of(completions: Sequence[Completion]) -> tuple[int, int, int]:
    """(prompt, completion, cached prompt) tokens of every request behind `completions`,
    as the replies said: a request of several samples has its one total on its first
    (`request_usage`, {} on the others); a sample with none is a request of its own (the
    single requests of a server that ignored `n`)."""
    prompt = completion = cached = 0
    for one in completions:
        usage = one.request_usage
        if usage:  # the first of several samples of one request: the request's one total
            prompt += int(usage.get("prompt_tokens", 0))
            completion += int(usage.get("completion_tokens", 0))
            cached += int(usage.get("cached_prompt_tokens", 0))
        elif usage is None:  # a request of its own
            prompt += one.prompt_tokens
            completion += int(one.completion_tokens or 0)
            cached += one.cached_prompt_tokens
    return prompt, completion, cached


class BudgetedSampler:
    """Wraps a sampler (under the generation cache). An HTTP sampler (`meters_attempts`)
    reserves and settles each attempt itself, through the hook set here around every call
    (models/cost/meter.py); any other reserves each call's worst case here and settles it
    to the usage of every completion it returned. `price`: the model's (None: its tokens
    count, its dollars do not: a local model, or no --max-cost)."""

    def __init__(self, inner: Any, ledger: BudgetLedger, price: Price | None) -> None:
        self.inner = inner
        self.ledger = ledger
        self.price = price
        self.meter = AttemptMeter(ledger, price)
        self.metered = bool(getattr(inner, "meters_attempts", False))

    def __getattr__(self, name: str) -> Any:  # identity, native_tools, supports_n, counter, ...
        return getattr(self.inner, name)

    def _usd(self, prompt: int, completion: int, cached: int = 0) -> float:
        return self.price.cost(prompt, completion, cached) if self.price is not None else 0.0

    async def _guarded(
        self, prompt: int, completion: int, send: Callable[[], Awaitable[Any]], method: str = BYTES
    ) -> Any:
        if self.metered:
            token = METER.set(self.meter)
            try:
                return await send()
            finally:
                METER.reset(token)
        reservation = await self.ledger.reserve(prompt + completion, self._usd(prompt, completion), method)
        try:
            result = await send()
        except BaseException:
            self.ledger.release(reservation)  # an in-process model: nothing billed
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
            0 if self.metered else byte_bound(messages, tools),
            params.max_tokens,
            lambda: self.inner.complete(messages, params, tools, **extra),
        )

    async def complete_n(
        self, messages: Sequence[Message], params: SamplingParams, n: int
    ) -> list[Completion]:
        return await self._guarded(
            0 if self.metered else byte_bound(messages),
            n * params.max_tokens,
            lambda: self.inner.complete_n(messages, params, n),
        )

    async def complete_tokens(self, prompt: Sequence[int], params: SamplingParams) -> Completion:
        return await self._guarded(
            len(prompt) + 1, params.max_tokens, lambda: self.inner.complete_tokens(prompt, params), TOKEN_IDS
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
