# One concept, over 500 lines: the run's budget, the ledger its processes share and the sampler drawing on it
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
import functools
import json
import os
import socket
import tempfile
import threading
import time
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
# Another machine's reservation unseen for longer than this is a crashed process's. A
# process in flight refreshes its entry every lease / 4 (and at each reservation and
# settling), and one HTTP attempt lasts at most --request-timeout: the lease is longer.
LEASE_MARGIN_S = 60.0
MIN_LEASE_S = 120.0
SHOWN_HOLDERS = 3  # the holders a stuck reservation's error names


def lease_for(request_timeout_s: float) -> float:
    """The lease of a reservation: --request-timeout plus a minute, at least 2 minutes."""
    return max(MIN_LEASE_S, float(request_timeout_s) + LEASE_MARGIN_S)


class BudgetExceeded(SamplerError):
    """The next request could take the run past its budget: it was not sent. Its item is
    an error whose cause is `budget` (not a wrong answer)."""


class LedgerError(SamplerError):
    """A budget ledger that cannot serve (not a ledger, unreadable JSON, a reservation
    that never frees room): one line naming the file and the fix."""


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
        # "host/pid/start" -> {"tokens", "usd", "seen"}: each process's reservations in flight
        "reserved": {},
        # run id -> {"usd", "tokens", "requests", "refused", "reservations"}: each run's
        # (shard's) own share
        "runs": {},
        "reservations": {},
    }


def _run_entry(data: dict[str, Any], run: str) -> dict[str, Any]:
    entry = data.setdefault("runs", {}).setdefault(run, {})
    for name, zero in (("usd", 0.0), ("tokens", 0), ("requests", 0), ("refused", 0)):
        entry.setdefault(name, zero)
    entry.setdefault("reservations", {})
    return entry


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


# -- who holds a reservation: machine, process id, process start ---------------------


def _hostname() -> str:
    return socket.gethostname()


def _now() -> float:
    return time.time()  # wall clock: the machines of a cluster share it (NTP), not monotonic time


@functools.lru_cache(maxsize=1)
def _pid_namespace() -> str:
    """This process's pid namespace (containers on one machine that share a hostname but
    not their process ids), "" where /proc has none."""
    try:
        return os.readlink("/proc/self/ns/pid").removeprefix("pid:").strip("[]")
    except OSError:
        return ""


def _machine() -> str:
    """Where a process id means this process: the hostname and the pid namespace."""
    namespace = _pid_namespace()
    return f"{_hostname()}{'~' + namespace if namespace else ''}"


def _start_time(pid: int) -> str:
    """The process's start (clock ticks since boot, /proc/PID/stat field 22): a pid that
    was reused by another process has another; "" where /proc does not say."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = text.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else ""


@functools.lru_cache(maxsize=4)
def _own_start(pid: int) -> str:
    return _start_time(pid)


def _me() -> str:
    """This process's key in the ledger: machine/pid/start."""
    pid = os.getpid()
    return f"{_machine()}/{pid}/{_own_start(pid)}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError):
        return False
    return True


class BudgetLedger:
    """The shared ledger file of one run (see the module's docstring).

    Each process's reservations in flight are kept under machine/pid/start with the time
    it last touched them (`seen`, refreshed every lease / 4 while it holds any). An entry
    is dropped as a crashed process's by a process of its own machine when the pid is
    gone or now belongs to a process started at another time; by a process of another
    machine, which cannot see its processes, when it was not seen for `lease_s`. A
    request that finds no room for `wait_s` is a LedgerError naming what holds it."""

    def __init__(
        self,
        path: Path,
        limits: Limits,
        run: str = "",
        lease_s: float | None = None,
        wait_s: float | None = None,
    ) -> None:
        self.path = Path(path)
        self.limits = limits
        self.run = run  # this run's (shard's) id: its own share of a shared ledger
        self.shared_path: Path | None = None  # --budget-ledger: the file the shards share
        self.lease_s = lease_for(600.0) if lease_s is None else float(lease_s)
        self.wait_s = 2 * self.lease_s if wait_s is None else float(wait_s)
        self._beat: tuple[int, threading.Thread] | None = None  # (pid, the refreshing thread)
        self._beat_lock = threading.Lock()
        self._closed = threading.Event()

    @classmethod
    def shared(cls, path: Path, limits: Limits, run: str, lease_s: float | None = None) -> BudgetLedger:
        """`--budget-ledger FILE`: created if missing (empty), else checked to be a ledger;
        its storage must have working locks. LedgerError: one line naming the fix."""
        path = Path(path)
        where = f"--budget-ledger {path}"
        if not path.parent.is_dir():
            raise LedgerError(f"{where}: no folder {path.parent}; create it (on storage every shard sees)")
        try:
            problem = lock_problem(path)  # creates it (empty) if missing
        except OSError as exc:
            raise LedgerError(f"{where}: {exc.strerror or exc}; give a file shards can write") from None
        if problem is not None:
            raise LedgerError(
                f"{where}: its storage has no working file locks ({problem}), so shards could spend the "
                "same dollar twice; put it on storage with flock (NFS with locking, Lustre with "
                "-o flock, a local disk for one machine)"
            )
        ledger = cls(path, limits, run, lease_s)
        ledger.shared_path = path

        def check(data: dict[str, Any]) -> None:
            if "spent_usd" not in data:
                raise LedgerError(f"{where}: not a budget ledger; give a new file (it is created)")

        try:
            ledger._update(check)  # under the lock: never a shard's half-written file
        except OSError as exc:
            raise LedgerError(f"{where}: {exc.strerror or exc}; give a file shards can write") from None
        return ledger

    @classmethod
    def create(
        cls, limits: Limits, directory: Path | None = None, lease_s: float | None = None
    ) -> BudgetLedger:
        """A fresh ledger in a new private folder (under $TMPDIR unless `directory`)."""
        folder = Path(tempfile.mkdtemp(prefix="agenteval-budget-", dir=directory))
        path = folder / LEDGER_NAME
        path.write_text(json.dumps(_empty()), encoding="utf-8")
        return cls(path, limits, lease_s=lease_s)

    def _where(self) -> str:
        return (
            f"--budget-ledger {self.path}"
            if self.shared_path is not None
            else f"the budget ledger {self.path}"
        )

    def _update(self, change: Callable[[dict[str, Any]], Any], write: bool = True) -> Any:
        """Read, change and write the ledger under an exclusive lock; `change`'s result.
        The file is rewritten in place (the lock is on it: NFS revalidates a locked file's
        data, not a renamed one's name), in one write."""
        import fcntl  # POSIX only: imported here so that the plugin imports without it

        with self.path.open("r+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                raw = handle.read()
                if raw.strip():
                    try:
                        data = json.loads(raw)
                    except ValueError:
                        data = None
                    if not isinstance(data, dict):
                        raise LedgerError(
                            f"{self._where()} is not JSON (a process killed while writing it?): remove it "
                            "to start over, and lower the budget by what it had spent"
                        )
                else:
                    data = _empty()
                result = change(data)
                if write:
                    # padded over the old text, never truncated: a truncate costs ~2 ms here
                    # (measured: benchmarks/budget_overhead.py), trailing blanks cost JSON nothing
                    text = json.dumps(data).encode().ljust(len(raw))
                    done = 0
                    while done < len(text):
                        done += os.pwrite(handle.fileno(), text[done:], done)
                return result
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _over(self, data: Mapping[str, Any], tokens: int, usd: float, reserved: bool) -> str | None:
        """Which limit `tokens`/`usd` more would pass (with the reservations: `reserved`)."""
        held = data["reserved"].values() if reserved else ()
        extra_tokens = sum(int(r.get("tokens", 0)) for r in held)
        extra_usd = sum(float(r.get("usd", 0.0)) for r in held)
        limit_usd, limit_tokens = self.limits.max_cost_usd, self.limits.max_total_tokens
        if limit_usd is not None and data["spent_usd"] + extra_usd + usd > limit_usd + 1e-12:
            return "cost"
        if limit_tokens is not None and data["spent_tokens"] + extra_tokens + tokens > limit_tokens:
            return "tokens"
        return None

    def _gone(self, key: str, entry: Any, me: str, machine: str, now: float) -> bool:
        """Whether another process's entry is a crashed one's (the class's docstring)."""
        if key == me:
            return False
        parts = key.rsplit("/", 2)
        if not isinstance(entry, dict) or len(parts) != 3 or not parts[1].isdigit():
            return True  # not this version's entry
        where, pid, start = parts[0], int(parts[1]), parts[2]
        if where == machine:
            if not _alive(pid):
                return True
            now_start = _start_time(pid)
            return bool(start and now_start and now_start != start)  # the pid was reused
        return now - float(entry.get("seen", 0.0)) > self.lease_s

    def _clean(self, data: dict[str, Any], me: str) -> None:
        reserved = data["reserved"]
        machine, now = me.rsplit("/", 2)[0], _now()
        for key in [k for k, entry in reserved.items() if self._gone(k, entry, me, machine, now)]:
            del reserved[key]
        if me in reserved:
            reserved[me]["seen"] = now

    def try_reserve(
        self, tokens: int, usd: float, method: str | None = None, why: str = ""
    ) -> Reservation | None:
        """A reservation, or None when other requests' reservations must settle first.
        Raises BudgetExceeded when the request cannot fit even then (`why`: what makes its
        worst case, `max_tokens 32768`, for the message). The ledger keeps one sum of reservations per
        process, so its file stays a few lines long."""
        me = _me()

        def change(data: dict[str, Any]) -> tuple[str, float, int] | str | None:
            self._clean(data, me)
            refused = self._over(data, tokens, usd, reserved=False)
            if refused is not None:
                data["refused"] += 1
                _run_entry(data, self.run)["refused"] += 1
                return refused, float(data["spent_usd"]), int(data["spent_tokens"])
            if self._over(data, tokens, usd, reserved=True) is not None:
                return "wait"
            held = data["reserved"].setdefault(me, {"tokens": 0, "usd": 0.0, "seen": _now()})
            held["tokens"], held["usd"] = held["tokens"] + tokens, held["usd"] + usd
            if method:
                for methods in (
                    data.setdefault("reservations", {}),
                    _run_entry(data, self.run)["reservations"],
                ):
                    methods[method] = methods.get(method, 0) + 1
            return None

        result = self._update(change)
        if result == "wait":
            return None
        if result is not None:
            raise BudgetExceeded(self._refusal(*result, tokens=tokens, usd=usd, why=why))
        self._keep_seen()
        return Reservation(tokens, usd)

    def _refusal(
        self, which: str, spent_usd: float, spent_tokens: int, tokens: int, usd: float, why: str
    ) -> str:
        """One short line (an item's error; the summary line says how to go on): the budget
        reached where at least half of it is spent and this request would fit a whole one;
        otherwise this request's worst case against what is left, and what to change."""
        if which == "cost":
            limit = float(self.limits.max_cost_usd or 0.0)
            spent, worst, money = spent_usd, usd, format_usd
            flag = "--max-cost"
        else:
            limit = float(self.limits.max_total_tokens or 0)
            spent, worst, money = float(spent_tokens), float(tokens), lambda v: f"{int(v)} tokens"
            flag = "--max-total-tokens"
        if worst <= limit and spent >= limit / 2:
            used = money(spent) if which == "cost" else str(int(spent))
            return f"not sent: budget {money(limit)} reached ({used} spent)"
        left = max(0.0, limit - spent)
        why = f" ({why})" if why else ""
        return (
            f"not sent: its worst case {money(worst)}{why} exceeds the {money(left)} left of {flag} "
            f"{format_usd(limit) if which == 'cost' else int(limit)}: lower --max-tokens or raise {flag}"
        )

    async def reserve(self, tokens: int, usd: float, method: str | None = None, why: str = "") -> Reservation:
        """`try_reserve`, waiting while others' reservations stand in the way, for at most
        `wait_s`: then a LedgerError naming the ledger and what holds it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_s
        while True:
            reservation = self.try_reserve(tokens, usd, method, why)
            if reservation is not None:
                return reservation
            if loop.time() >= deadline:
                raise LedgerError(self._stuck())
            await asyncio.sleep(WAIT_S)

    def _stuck(self) -> str:
        data = self._update(lambda data: data, write=False)
        now, me = _now(), _me()
        holders = []
        for key, entry in sorted(
            data.get("reserved", {}).items(), key=lambda kv: -float(kv[1].get("usd", 0))
        ):
            where, pid, _ = key.rsplit("/", 2)
            host = "this process" if key == me else f"{where.split('~')[0]} pid {pid}"
            holders.append(
                f"{host} ({int(entry.get('tokens', 0))} tokens, {format_usd(float(entry.get('usd', 0.0)))}, "
                f"seen {max(0.0, now - float(entry.get('seen', now))):.0f} s ago)"
            )
        more = len(holders) - SHOWN_HOLDERS
        named = ", ".join(holders[:SHOWN_HOLDERS]) + (f" and {more} more" if more > 0 else "")
        seen = [float(entry.get("seen", now)) for entry in data.get("reserved", {}).values()]
        stale = any(now - at > self.lease_s / 2 for at in seen)
        if not stale:  # every holder is alive: the room is taken by requests in flight
            return (
                f"not sent: waited {self.wait_s:g} s for room in {self._where()}, held by "
                f"{named or 'nothing'}, all alive (their requests are in flight): lower --max-tokens "
                "or raise the budget"
            )
        return (
            f"not sent: waited {self.wait_s:g} s for room in {self._where()}, held by {named or 'nothing'}; "
            f"a crashed process's reservation is dropped {self.lease_s:g} s after it was last seen "
            "(--request-timeout + 60 s): check those processes"
        )

    def _keep_seen(self) -> None:
        """Refresh this process's `seen` every lease / 4 while it holds a reservation (a
        thread: an attempt in flight touches the ledger only when it ends)."""
        pid = os.getpid()
        with self._beat_lock:
            if self._beat is not None and self._beat[0] == pid:
                return
            thread = threading.Thread(target=self._beat_loop, name="agenteval-ledger-seen", daemon=True)
            self._beat = (pid, thread)
            thread.start()

    def _beat_loop(self) -> None:
        me = _me()

        def refresh(data: dict[str, Any]) -> None:
            if me in data["reserved"]:
                data["reserved"][me]["seen"] = _now()

        while not self._closed.wait(self.lease_s / 4):
            try:
                self._update(refresh)
            except (OSError, LedgerError):
                continue  # a transient storage error (NFS): the next beat tries again; a stopped
                # beat would let other machines drop this process's live reservations

    def close(self) -> None:
        """Stop refreshing this process's entry (the run is over)."""
        self._closed.set()

    def _drop(self, data: dict[str, Any], reservation: Reservation) -> None:
        me = _me()
        held = data["reserved"].get(me)
        if not isinstance(held, dict):
            return
        held["tokens"] -= reservation.tokens
        held["usd"] = round(held["usd"] - reservation.usd, 12)
        held["seen"] = _now()
        if held["tokens"] <= 0:
            del data["reserved"][me]

    def settle(self, reservation: Reservation, tokens: int, usd: float) -> None:
        """Replace a reservation by what the request really used."""

        def change(data: dict[str, Any]) -> None:
            self._drop(data, reservation)
            data["spent_tokens"] += int(tokens)
            data["spent_usd"] = round(data["spent_usd"] + usd, 9)
            data["requests"] += 1
            own = _run_entry(data, self.run)
            own["usd"], own["tokens"] = round(own["usd"] + usd, 9), own["tokens"] + int(tokens)
            own["requests"] += 1

        self._update(change)

    def settle_worst(self, reservation: Reservation) -> None:
        """Settle a reservation at itself: an attempt the server may have billed whose
        usage never came back (a timeout, a reset, a reply cut short)."""
        self.settle(reservation, reservation.tokens, reservation.usd)

    def release(self, reservation: Reservation) -> None:
        """Drop a reservation whose request provably never reached the server."""
        self._update(lambda data: self._drop(data, reservation))

    def _read(self) -> dict[str, Any]:
        """The ledger as it stands, read under the lock ({} where it cannot be read)."""
        try:
            return self._update(lambda data: data, write=False)
        except (OSError, LedgerError):
            return {}

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
        """This run's (shard's) own share of the ledger, its prompt reservations included."""
        data = self._read()
        own = (data.get("runs") or {}).get(self.run) or {}
        return LedgerState(
            float(own.get("usd", 0.0)),
            int(own.get("tokens", 0)),
            int(own.get("requests", 0)),
            int(own.get("refused", 0)),
            dict(own.get("reservations") or {}),
        )

    def remove(self) -> None:
        self.close()
        for path in (self.path, self.path.parent):
            try:
                path.unlink() if path.is_file() else path.rmdir()
            except OSError:
                pass


def worst_case_why(max_tokens: int, samples: int) -> str:
    """What makes a request's worst case, for a refusal: `max_tokens 32768`, `4 x max_tokens 512`."""
    return f"max_tokens {max_tokens}" if samples == 1 else f"{samples} x max_tokens {max_tokens}"


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
        self,
        prompt: int,
        completion: int,
        send: Callable[[], Awaitable[Any]],
        method: str = BYTES,
        why: str = "",
    ) -> Any:
        if self.metered:
            token = METER.set(self.meter)
            try:
                return await send()
            finally:
                METER.reset(token)
        reservation = await self.ledger.reserve(
            prompt + completion, self._usd(prompt, completion), method, why
        )
        try:
            result = await send()
        except BaseException:
            self.ledger.release(reservation)  # an in-process model (llama, transformers): nothing billed
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
            why=worst_case_why(params.max_tokens, 1),
        )

    async def complete_n(
        self, messages: Sequence[Message], params: SamplingParams, n: int
    ) -> list[Completion]:
        return await self._guarded(
            0 if self.metered else byte_bound(messages),
            n * params.max_tokens,
            lambda: self.inner.complete_n(messages, params, n),
            why=worst_case_why(params.max_tokens, n),
        )

    async def complete_tokens(self, prompt: Sequence[int], params: SamplingParams) -> Completion:
        return await self._guarded(
            len(prompt) + 1,
            params.max_tokens,
            lambda: self.inner.complete_tokens(prompt, params),
            TOKEN_IDS,
            worst_case_why(params.max_tokens, 1),
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
