"""Human verifications: `<data>_verifications.json`, one entry per problem id with the
the design documents' keys (`problem_id, scores, total_score, status, comments, verified_at`) plus
`annotator`, `item_sha256` (stale when the data changed), `revision` (a stale write
from a second tab is refused) and `history` (earlier versions are kept, not lost)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from pytest_agenteval.stats.proportions import wilson
from pytest_agenteval.tasks.datagen._stats import _ratio
from pytest_agenteval.tasks.datagen._verdict import DIMENSIONS

STATUSES = ("approved", "rejected", "needs_revision")
SCHEMA_VERSION = 1


class Conflict(Exception):
    """The entry changed since the client read it (another tab or annotator)."""


class InvalidVerification(ValueError):
    pass


def verifications_path(data_path: Path) -> Path:
    """generated.jsonl -> generated_verifications.json, beside the data."""
    return data_path.with_name(f"{data_path.stem}_verifications.json")


def load_verifications(path: Path) -> dict[str, dict[str, Any]]:
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise InvalidVerification(f"{path}: expected a JSON object keyed by problem id")
    return data


def atomic_write_json(path: Path, value: Any) -> None:
    """Temp file in the same folder, fsync, os.replace: a crash leaves old or new, never half."""
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(value, handle, ensure_ascii=False, indent=2, sort_keys=True)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _validated(payload: Mapping[str, Any]) -> tuple[dict[str, int], str, str]:
    scores = payload.get("scores")
    if not isinstance(scores, Mapping) or set(scores) != set(DIMENSIONS):
        raise InvalidVerification(f"scores must hold exactly {', '.join(DIMENSIONS)}")
    clean = {}
    for dim in DIMENSIONS:
        value = scores[dim]
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
            raise InvalidVerification(f"scores.{dim} must be an integer 1-5")
        clean[dim] = value
    status = payload.get("status")
    if status not in STATUSES:
        raise InvalidVerification(f"status must be one of {', '.join(STATUSES)}")
    comments = payload.get("comments", "")
    if not isinstance(comments, str):
        raise InvalidVerification("comments must be a string")
    return clean, status, comments


def apply_verification(
    store: dict[str, dict[str, Any]],
    problem_id: str,
    payload: Mapping[str, Any],
    *,
    item_sha256: str,
    annotator: str,
    now: datetime,
) -> dict[str, Any]:
    """Update `store` in place; raises Conflict when `payload["base_revision"]` is not
    the entry's current revision (0 for a new entry)."""
    scores, status, comments = _validated(payload)
    current = store.get(problem_id)
    revision = int(current.get("revision", 1)) if current else 0
    if payload.get("base_revision") != revision:
        raise Conflict(f"{problem_id} was saved elsewhere (revision {revision}); reload to see it")
    history = list(current.get("history", [])) if current else []
    if current:
        history.append({k: v for k, v in current.items() if k != "history"})
    entry = {
        "problem_id": problem_id,
        "scores": scores,
        "total_score": sum(scores.values()) / len(scores),
        "status": status,
        "comments": comments,
        "verified_at": now.isoformat(timespec="seconds"),
        "annotator": annotator,
        "item_sha256": item_sha256,
        "revision": revision + 1,
        "schema_version": SCHEMA_VERSION,
        "time_spent_s": payload.get("time_spent_s"),
        "history": history,
    }
    store[problem_id] = entry
    return entry


def human_summary(path: Path, items: Mapping[str, str]) -> dict[str, Any] | None:
    """Approval among verified items of this data (`items`: id -> sha256); None when no
    verification file exists."""
    if not path.is_file():
        return None
    try:
        store = load_verifications(path)
    except (OSError, ValueError) as exc:
        return {"path": str(path), "error": f"unreadable: {exc}"}
    entries = [e for pid, e in store.items() if pid in items and e.get("status") in STATUSES]
    approved = sum(e["status"] == "approved" for e in entries)
    return {
        "path": str(path),
        "items": len(items),
        "verified": len(entries),
        "coverage": _ratio(len(entries), len(items)),
        "status_counts": {s: sum(e["status"] == s for e in entries) for s in STATUSES},
        "approved_rate": _ratio(approved, len(entries)),
        "approved_rate_ci95": wilson(approved, len(entries)),
        "stale": sorted(e["problem_id"] for e in entries if e.get("item_sha256") != items[e["problem_id"]]),
        "annotators": sorted({str(e.get("annotator")) for e in entries}),
    }


def agreement_with_judges(
    path: Path, table: Mapping[str, Mapping[str, Mapping[str, int] | None]]
) -> dict[str, Any]:
    """Each LLM judge against the human verifications of the same items (the calibration
    none of the anchors ship): ordinal alpha per dimension, interval alpha on the mean,
    and the judge's mean offset from the human (positive: more lenient)."""
    from pytest_agenteval.stats.krippendorff import krippendorff_alpha  # numpy: not at import

    try:
        store = load_verifications(path)
    except (OSError, ValueError):
        return {}
    human = {
        pid: e["scores"] for pid, e in store.items() if pid in table and isinstance(e.get("scores"), dict)
    }
    judges = sorted({j for by_judge in table.values() for j in by_judge})
    out: dict[str, Any] = {}
    for judge in judges:
        pairs = [(human[i], table[i][judge]) for i in human if table[i].get(judge) is not None]
        if not pairs:
            continue
        alpha = {d: krippendorff_alpha([[h[d], j[d]] for h, j in pairs], "ordinal") for d in DIMENSIONS}
        means = [(sum(h.values()) / 4, sum(j.values()) / 4) for h, j in pairs]
        out[judge] = {
            "items": len(pairs),
            "alpha": alpha,
            "alpha_mean": krippendorff_alpha([list(m) for m in means], "interval"),
            "mean_offset": sum(j - h for h, j in means) / len(means),
        }
    return out
