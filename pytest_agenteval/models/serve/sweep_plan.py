"""Which servers a sweep launches, on which devices, and in what order: pure planning.

Every adapter is served beside its base by one server (with the base itself when the base
is in the sweep too); each full checkpoint or other gguf gets a server of its own. Servers
get disjoint device sets of `--serve-tp` devices, one replica each; when the devices (or
`--serve-max-servers`) do not allow all at once, the next server in model order starts as
soon as a running one is done (`SweepSchedule`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_agenteval.models.serve.commands import replica_devices


@dataclass(frozen=True)
class PlannedModel:
    """One model of the sweep, as the planner needs it."""

    label: str
    kind: str  # "gguf" | "checkpoint" | "adapter" (a PEFT folder or a gguf LoRA)
    path: str
    base: str | None = None  # adapters: the base's path


@dataclass(frozen=True)
class PlannedServer:
    """One server: the weights it loads and the models (labels, in model order) it serves."""

    base: str
    labels: tuple[str, ...]
    adapters: tuple[str, ...] = ()  # the labels among `labels` that are adapters on `base`


@dataclass(frozen=True)
class SweepPlan:
    servers: tuple[PlannedServer, ...]
    slots: tuple[str | None, ...]  # the device sets of servers running at once (None: leave as is)

    @property
    def at_once(self) -> int:
        return len(self.slots)

    def waves(self) -> list[tuple[int, ...]]:
        """The servers grouped as they would start if each wave waited for the whole of the
        previous one (a server actually starts as soon as any slot is free)."""
        size = max(1, self.at_once)
        return [tuple(range(i, min(i + size, len(self.servers)))) for i in range(0, len(self.servers), size)]


def plan_servers(
    models: Sequence[PlannedModel], gpus: str | None, tp: int, max_servers: int = 0
) -> SweepPlan:
    """Group the sweep's models into servers and size the slots; ValueError (one line) on
    a bad --serve-gpus/--serve-tp/--serve-max-servers."""
    if max_servers < 0:
        raise ValueError(
            f"--serve-max-servers must be >= 0 (0: as many as the GPUs allow), got {max_servers}"
        )
    groups: dict[str, list[PlannedModel]] = {}
    for model in models:
        key = model.base if model.kind == "adapter" and model.base else model.path
        groups.setdefault(key, []).append(model)
    servers = tuple(
        PlannedServer(
            base, tuple(m.label for m in members), tuple(m.label for m in members if m.kind == "adapter")
        )
        for base, members in groups.items()
    )
    slots: list[str | None] = replica_devices(gpus, tp) if gpus else [None] * len(servers)
    if max_servers:
        slots = slots[:max_servers]
    return SweepPlan(servers, tuple(slots[: len(servers)]))


class SweepSchedule:
    """Which servers run now: the first in model order take the free slots; a server stops
    once every item of every model it serves has finished, and the next one takes its slot.
    Pure bookkeeping: the caller starts and stops the processes."""

    def __init__(self, plan: SweepPlan) -> None:
        self.plan = plan
        self.pending: list[int] = list(range(len(plan.servers)))
        self.running: dict[int, int] = {}  # server -> slot
        self.free: list[int] = list(range(plan.at_once))
        self.remaining: dict[str, int] | None = None  # label -> items not finished (None: unknown yet)

    def start_next(self) -> list[tuple[int, str | None]]:
        """(server, devices) for each server that may start now, in model order."""
        started = []
        while self.free and self.pending:
            server, slot = self.pending.pop(0), self.free.pop(0)
            self.running[server] = slot
            started.append((server, self.plan.slots[slot]))
        return started

    def expect(self, counts: Mapping[str, int]) -> list[int]:
        """The items each model has (from collection); returns the running servers with
        nothing left to do (their models have no items), which are released."""
        self.remaining = {label: int(counts.get(label, 0)) for s in self.plan.servers for label in s.labels}
        return self._release_done()

    def finished(self, label: str) -> list[int]:
        """One item of `label` finished; returns the running servers now done (released)."""
        if self.remaining is not None and self.remaining.get(label, 0) > 0:
            self.remaining[label] -= 1
        return self._release_done()

    def failed(self, server: int) -> None:
        """A server that did not start: its slot goes to the next one."""
        self.release(server)

    def release(self, server: int) -> None:
        slot = self.running.pop(server, None)
        if slot is not None:
            self.free.append(slot)
            self.free.sort()

    def done(self, server: int) -> bool:
        if self.remaining is None:
            return False
        return all(self.remaining.get(label, 0) == 0 for label in self.plan.servers[server].labels)

    def _release_done(self) -> list[int]:
        self.pending = [s for s in self.pending if not self.done(s)]  # nothing left to serve
        finished = [s for s in sorted(self.running) if self.done(s)]
        for server in finished:
            self.release(server)
        return finished
