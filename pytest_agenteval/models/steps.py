"""A checkpoint's training step, for the trackers' step axis (`--agenteval-log`): parsed from
its label (`step-200`, `global_step_200`, `ckpt-200`, `checkpoint-200`, `iter_0000200`) or
given in the sweep's model spec as `LABEL@STEP=PATH`."""

from __future__ import annotations

import re

# the word, an optional - or _, the digits, at the end of the label (`run3-step-200` too)
_IN_LABEL = re.compile(r"(?:^|[^A-Za-z])(?:global_step|step|ckpt|checkpoint|iter)[-_]?(\d+)$", re.IGNORECASE)
_GIVEN = re.compile(r"^(.+)@(\d+)$")


def step_of(label: str) -> int | None:
    """The training step a label names (`iter_0000200` -> 200), None when it names none."""
    match = _IN_LABEL.search(label)
    return int(match.group(1)) if match else None


def split_step(label: str) -> tuple[str, int | None]:
    """`LABEL@STEP` -> (LABEL, STEP); a label without `@STEP` -> (label, None)."""
    match = _GIVEN.match(label)
    if match:
        return match.group(1), int(match.group(2))
    return label, None
