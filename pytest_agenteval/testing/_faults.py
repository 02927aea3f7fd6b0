"""Deterministic fault decisions.

A request's fate is a pure function of ``(fault_seed, request key, attempt number for
that key)``: a retry of the same body gets an independent but reproducible draw, so a
whole run's fault pattern is repeatable while each retry can still succeed.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

FAULT_KINDS = ("429", "500", "502", "503", "504", "reset", "stall", "truncated", "stall_stream")
# ``stall`` (silent before any byte) and ``stall_stream`` (a streamed reply that goes
# silent after its first event) are left out of the default mix: they only make sense
# with a client timeout.
DEFAULT_FAULT_MIX: Mapping[str, float] = {
    "429": 1.0,
    "500": 1.0,
    "503": 1.0,
    "reset": 1.0,
    "truncated": 1.0,
}


@dataclass(frozen=True)
class FaultContext:
    """What a ``fault_plan`` callable sees; ``attempt`` counts from 0 per request key."""

    key: str
    attempt: int
    endpoint: str
    body: dict[str, Any]


FaultPlan = Callable[[FaultContext], "str | None"]


def unit_draw(seed: int, key: str, attempt: int, salt: str) -> float:
    """A uniform number in [0, 1) derived from a hash (no global RNG state)."""
    digest = hashlib.sha256(f"{seed}:{salt}:{attempt}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def parse_fault_mix(spec: str) -> dict[str, float]:
    """``"429=2,500,reset=0.5"`` -> ``{"429": 2.0, "500": 1.0, "reset": 0.5}``."""
    mix: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        kind, _, weight = part.partition("=")
        mix[kind.strip()] = float(weight) if weight else 1.0
    validate_fault_mix(mix)
    return mix


def validate_fault_mix(mix: Mapping[str, float]) -> None:
    unknown = set(mix) - set(FAULT_KINDS)
    if unknown:
        raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {FAULT_KINDS}")
    if any(w < 0 for w in mix.values()) or not sum(mix.values()) > 0:
        raise ValueError(f"fault weights must be >= 0 with a positive sum: {dict(mix)}")


class FaultInjector:
    """Counts attempts per key and decides which (if any) fault an attempt gets.

    Precedence: ``fail_first_k`` (attempts ``< k`` fail with ``first_k_kind``), then
    ``plan`` (its answer is final; ``None``/``"ok"`` = no fault), then ``rate``.
    """

    def __init__(
        self,
        *,
        rate: float = 0.0,
        mix: Mapping[str, float] = DEFAULT_FAULT_MIX,
        seed: int = 0,
        fail_first_k: int = 0,
        first_k_kind: str = "503",
        plan: FaultPlan | None = None,
    ) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"fault_rate must be within [0, 1], got {rate}")
        validate_fault_mix(mix)
        validate_fault_mix({first_k_kind: 1.0})
        self.rate, self.seed, self.plan = rate, seed, plan
        self.fail_first_k, self.first_k_kind = fail_first_k, first_k_kind
        total = sum(mix.values())
        self._cumulative: list[tuple[float, str]] = []
        acc = 0.0
        for kind, weight in mix.items():
            acc += weight / total
            self._cumulative.append((acc, kind))
        self._attempts: dict[str, int] = {}
        self._lock = threading.Lock()

    def next_attempt(self, key: str) -> int:
        with self._lock:
            attempt = self._attempts.get(key, 0)
            self._attempts[key] = attempt + 1
        return attempt

    def decide(self, key: str, attempt: int, endpoint: str, body: dict[str, Any]) -> str | None:
        if attempt < self.fail_first_k:
            return self.first_k_kind
        if self.plan is not None:
            kind = self.plan(FaultContext(key, attempt, endpoint, body))
            if kind in (None, "ok"):
                return None
            validate_fault_mix({str(kind): 1.0})
            return str(kind)
        if self.rate <= 0.0 or unit_draw(self.seed, key, attempt, "fault") >= self.rate:
            return None
        pick = unit_draw(self.seed, key, attempt, "kind")
        return next((k for edge, k in self._cumulative if pick < edge), self._cumulative[-1][1])

    def reset(self) -> None:
        with self._lock:
            self._attempts.clear()
