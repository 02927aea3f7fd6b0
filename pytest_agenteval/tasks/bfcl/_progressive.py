"""Progressive evaluation (the design documents' strategy): 5 items, then 50, then all.

Each stage is a prefix of the category's items in dataset order. The next
stage runs only while the accuracy over the finished stage reaches the
threshold, so a clearly failing configuration stops after a few items.
"""

from __future__ import annotations

from collections.abc import Sequence


def progressive_stages(n_items: int, stages: Sequence[int] = (5, 50)) -> list[int]:
    """Cumulative stage sizes, ending with ``n_items``: 400 items -> [5, 50, 400]."""
    if n_items < 0 or any(size <= 0 for size in stages):
        raise ValueError("item count must be >= 0 and stage sizes > 0")
    sizes = sorted({size for size in stages if size < n_items})
    return [*sizes, n_items] if n_items else []


def next_stage(results_so_far: Sequence[bool], stage_sizes: Sequence[int], threshold: float) -> int | None:
    """How many items the run should have in total next, or ``None`` to stop.

    ``results_so_far`` are the verdicts of the items run so far, in order. An
    unfinished stage is completed; a finished one leads to the next stage only
    if its accuracy (over all items so far) is at least ``threshold``.
    """
    done = len(results_so_far)
    pending = [size for size in stage_sizes if size > done]
    if not pending:
        return None
    if done == 0 or done not in stage_sizes:
        return pending[0]
    accuracy = sum(results_so_far) / done
    return pending[0] if accuracy >= threshold else None
