"""Reading JSONL files line by line, each reader naming its own fix for a bad line."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def read_jsonl(
    path: Path, bad_line: Callable[[int, json.JSONDecodeError], Exception]
) -> Iterator[tuple[int, Any]]:
    """(line number, row) of a JSONL file, blank lines skipped; a line that is not JSON
    raises what `bad_line(number, error)` makes of it (each reader names its own fix)."""
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                raise bad_line(number, exc) from None
