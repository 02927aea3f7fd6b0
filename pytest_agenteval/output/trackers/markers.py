"""The already-logged marker: after logging, a results file gets one line per tracker run,
`{"type": "tracker", "target", "run_id", "model_label", "step", "fingerprint", ...}`. A rerun
whose numbers are the same (a rerun from the cache) finds it and logs again only when asked
(`--agenteval-log-always`). Readers of results files take only `problem` and `summary` lines."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

TYPE = "tracker"
_TAIL = 1 << 16  # markers are the last lines: read at most this many bytes of a file


def read_markers(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """The markers of these results files (missing or unreadable ones are skipped)."""
    found = []
    for path in paths:
        try:
            with path.open("rb") as handle:
                handle.seek(0, 2)
                handle.seek(max(0, handle.tell() - _TAIL))
                tail = handle.read()
        except OSError:
            continue
        for line in tail.splitlines():
            if line.startswith(b'{"type": "tracker"'):
                try:
                    found.append(json.loads(line))
                except ValueError:
                    continue
    return found


def marker(target: str, run_id: str, label: str, step: int | None, fingerprint: str) -> dict[str, Any]:
    return {
        "type": TYPE,
        "target": target,
        "run_id": run_id,
        "model_label": label,
        "step": step,
        "fingerprint": fingerprint,
        "logged_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def find(markers: Sequence[Mapping[str, Any]], target: str, fingerprint: str) -> Mapping[str, Any] | None:
    return next(
        (m for m in markers if m.get("target") == target and m.get("fingerprint") == fingerprint), None
    )


def append_markers(path: Path, lines: Sequence[Mapping[str, Any]]) -> None:
    """Add the markers to a results file (an OSError is the caller's to report)."""
    with path.open("a", encoding="utf-8") as handle:
        handle.writelines(json.dumps(m, ensure_ascii=False) + "\n" for m in lines)
