"""Tabular benchmark data from a hub id, a save_to_disk folder, JSONL or parquet."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_agenteval.api.suite import DataError
from pytest_agenteval.datasets.provenance import describe_source, file_sha256, record_commit

__all__ = ["describe_source", "file_sha256", "load_rows", "require_columns", "require_unique"]

_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


def load_rows(
    source: str, *, option: str, revision: str | None = None, split: str = "train"
) -> list[dict[str, Any]]:
    """Rows as dicts. `option` names the command-line flag in error messages."""
    path = Path(source).expanduser()
    if path.is_dir():
        return _load_from_disk(path, option, split)
    if path.is_file():
        if path.suffix in (".jsonl", ".json"):
            return _load_json(path, option)
        if path.suffix == ".parquet":
            return _load_parquet(path, option)
        raise DataError(
            f"{option} {source}: unsupported file type {path.suffix!r}; "
            "use .jsonl, .parquet or a save_to_disk folder"
        )
    if option != "--dataset-path" and _HUB_ID.match(source):  # a mistyped path is not a hub id
        return _load_hub(source, option, revision, split)
    raise DataError(
        f"{option} {source}: no such file or folder; give a JSONL or parquet file or a save_to_disk folder"
    )


def _load_json(path: Path, option: str) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json" and text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"{option} {path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    else:
        rows = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DataError(f"{option} {path}:{number}: not valid JSON ({exc.msg})") from None
    if not all(isinstance(row, dict) for row in rows):
        raise DataError(f"{option} {path}: every line must be a JSON object")
    return rows


def _load_parquet(path: Path, option: str) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path).to_pylist()
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many kinds
        raise DataError(f"{option} {path}: cannot read parquet ({type(exc).__name__})") from None


def _load_from_disk(path: Path, option: str, split: str) -> list[dict[str, Any]]:
    import datasets

    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as exc:  # noqa: BLE001
        raise DataError(f"{option} {path}: not a save_to_disk folder ({type(exc).__name__})") from None
    if isinstance(loaded, datasets.DatasetDict):
        if split not in loaded:
            raise DataError(f"{option} {path}: no split {split!r} (has {sorted(loaded)})")
        loaded = loaded[split]
    return loaded.to_list()


def _load_hub(source: str, option: str, revision: str | None, split: str) -> list[dict[str, Any]]:
    from pytest_agenteval.datasets.hub import hub_unreachable, offline_requested

    problem = None if offline_requested() else hub_unreachable()
    if problem is not None:  # in seconds, not after the datasets library's retries
        raise DataError(
            f"cannot load hub dataset {source}: the hub is unreachable ({problem}); for offline runs pass "
            "--dataset-path FILE, or set HF_HUB_OFFLINE=1 to use a cached copy"
        )
    import datasets

    try:  # load_dataset's steps, keeping the builder: its hash is the commit the revision resolved to
        builder = datasets.load_dataset_builder(source, revision=revision)
        builder.download_and_prepare()
        loaded = builder.as_dataset(split=split)
    except Exception as exc:  # noqa: BLE001 - offline, gated, missing: all one line
        reason = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise DataError(
            f"cannot load hub dataset {source} ({reason}); for offline runs pass --dataset-path FILE"
        ) from None
    record_commit(source, revision, builder.hash)
    return loaded.to_list()


def require_columns(rows: Sequence[dict[str, Any]], columns: Sequence[str], where: str) -> None:
    if not rows:
        raise DataError(f"{where}: no rows; the data is empty")
    missing = [c for c in columns if c not in rows[0]]
    if missing:
        raise DataError(
            f"{where}: missing column(s) {', '.join(missing)} (has "
            f"{', '.join(sorted(rows[0]))}); the data needs {', '.join(columns)}"
        )
    for number, row in enumerate(rows[1:], 2):  # JSONL rows need not share their keys
        absent = [c for c in columns if c not in row]
        if absent:
            raise DataError(f"{where}: row {number} has no {', '.join(absent)}; every row needs them")


def require_unique(ids: Sequence[Any], where: str) -> None:
    seen: set[str] = set()
    for value in ids:
        if str(value) in seen:
            raise DataError(f"{where}: duplicate id {value!r}; ids must be unique")
        seen.add(str(value))
