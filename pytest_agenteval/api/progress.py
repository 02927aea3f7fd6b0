"""What moves inside a generation before it finishes, for the live progress line: tokens
generated (as a backend streams or samples them), model turns, tool calls and judge calls.

The runtime gives each rollout a `Tally` (`tracking`); backends, the tool loops and the
judge add to the current one through the functions here, from the rollout's task or from
a thread that runs in a copy of its context. Work done outside a rollout (a judge called
while scoring) goes to one tally of the process, `outside()`."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(eq=False)  # one per rollout: the running list removes this one, not an equal one
class Tally:
    tokens: int = 0  # completion tokens of the model calls finished (cache hits excluded)
    streaming: int = 0  # tokens of calls still generating, from backends that count as they go
    turns: int = 0
    tool_calls: int = 0
    judge_calls: int = 0

    @property
    def generated(self) -> int:
        return self.tokens + self.streaming


_current: contextvars.ContextVar[Tally | None] = contextvars.ContextVar("agenteval_tally", default=None)
_outside = Tally()


def outside() -> Tally:
    """This process's tally of work done outside any rollout."""
    return _outside


def current() -> Tally:
    return _current.get() or _outside


@contextlib.contextmanager
def tracking(tally: Tally) -> Iterator[Tally]:
    """Count what the code inside (and the tasks it starts) does into `tally`."""
    token = _current.set(tally)
    try:
        yield tally
    finally:
        _current.reset(token)


def _add_call(tally: Tally, completion: Any) -> None:
    """A finished model call: its tokens replace what was counted while it streamed."""
    tally.streaming = 0
    if not getattr(completion, "cached", False):
        tally.tokens += int(getattr(completion, "completion_tokens", 0) or 0)


def note_token(count: int = 1) -> None:
    """Tokens sampled by a call still running (in-process backends, token by token)."""
    current().streaming += count


def note_turn(completion: Any) -> None:
    """One model turn of a multi-turn rollout finished."""
    tally = current()
    _add_call(tally, completion)
    tally.turns += 1


def note_tool_calls(count: int = 1) -> None:
    """Tool calls executed."""
    current().tool_calls += count


def note_judge_call(completion: Any) -> None:
    """One judge call answered."""
    tally = current()
    _add_call(tally, completion)
    tally.judge_calls += 1
