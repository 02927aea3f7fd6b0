"""The GAIA leaderboard submission file.

One JSON object a line with ``task_id``, ``model_answer`` and
``reasoning_trace`` (the leaderboard requires the first two; the trace is
optional and left out when None). A None answer is written as ``""``: the
leaderboard's scorer cannot take a JSON null in older revisions.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path


def write_submission(
    path: Path | str,
    rows: Iterable[tuple[str, str | None, str | None]],
) -> Path:
    """Write ``(task_id, model_answer, reasoning_trace)`` rows atomically; returns the path.

    Raises ValueError on an empty or repeated ``task_id`` (the leaderboard
    would reject or double-count it); nothing is written then.
    """
    path = Path(path)
    lines: list[str] = []
    seen: set[str] = set()
    for task_id, model_answer, reasoning_trace in rows:
        if not task_id:
            raise ValueError("GAIA submission row with an empty task_id")
        if task_id in seen:
            raise ValueError(f"GAIA submission has task_id {task_id!r} twice")
        seen.add(task_id)
        answer = "" if model_answer is None else str(model_answer)
        record = {"task_id": task_id, "model_answer": answer}
        if reasoning_trace is not None:
            record["reasoning_trace"] = reasoning_trace
        lines.append(json.dumps(record, ensure_ascii=False) + "\n")
    _write_atomic(path, "".join(lines))
    return path


def _write_atomic(path: Path, text: str) -> None:
    """Write to a temporary file beside ``path`` and rename it over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
