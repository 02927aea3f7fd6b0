"""Load GAIA tasks from a local folder or from the gated Hugging Face dataset.

Layouts accepted for a local ``path`` (the first that holds a metadata file
wins): ``path/2023/<split>/`` (the repository root, as ``snapshot_download``
leaves it), ``path/<split>/`` (the ``2023`` folder) and ``path`` itself (the
split folder). In a split folder ``metadata.parquet`` (the current layout) is
read before ``metadata.jsonl`` (the older one). Attachments sit beside the
metadata file under their ``file_name``.

Every count comes from the data; nothing here knows how many tasks GAIA has.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

GAIA_REPO_ID = "gaia-benchmark/GAIA"
GAIA_URL = f"https://huggingface.co/datasets/{GAIA_REPO_ID}"
GAIA_YEAR = "2023"
SPLITS = ("validation", "test")
METADATA_FILES = ("metadata.parquet", "metadata.jsonl")
REQUIRED_COLUMNS = ("task_id", "Question", "Level", "Final answer")
NO_TOKEN_MESSAGE = f"GAIA is gated: accept the terms at {GAIA_URL} and set HF_TOKEN, or pass --gaia-path DIR"

Split = Literal["validation", "test"]

_TOOL_PREFIX = re.compile(r"^\s*(?:\d+\s*[.)]|[-*•])\s*")


class GaiaUnavailable(Exception):
    """GAIA cannot be reached; the message is one line saying why and what to do."""


class GaiaDataError(Exception):
    """The GAIA files are there but malformed; the message is one line."""


@dataclass(frozen=True)
class GaiaTask:
    """One GAIA question, as the dataset states it.

    ``final_answer`` is None where the data has no answer (``"?"`` on the
    test split). ``file_path`` is the attachment beside the metadata file.
    ``annotator_steps`` is the annotators' ``Number of steps`` as an int and
    ``annotator_tools`` their ``Tools`` text split into one tool per line,
    numbering removed; the whole ``Annotator Metadata`` is kept as is.
    """

    task_id: str
    question: str
    level: int
    final_answer: str | None
    file_name: str | None = None
    file_path: Path | None = None
    annotator_steps: int | None = None
    annotator_tools: tuple[str, ...] = ()
    annotator_metadata: Mapping[str, Any] = field(default_factory=dict, compare=False)


def load_gaia(
    split: Split = "validation",
    path: Path | str | None = None,
    token: str | None = None,
    *,
    revision: str | None = None,
) -> list[GaiaTask]:
    """The tasks of ``split``, in dataset order, from ``path`` or else the Hub.

    Raises :class:`GaiaUnavailable` when the data cannot be reached (no token,
    missing path, no metadata file, Hub error) and :class:`GaiaDataError`
    when it is malformed.
    """
    if split not in SPLITS:
        raise ValueError(f"GAIA split must be 'validation' or 'test', not {split!r}")
    if path is not None:
        return read_split_dir(find_split_dir(Path(path).expanduser(), split))
    token = token or resolve_token()
    if not token:
        raise GaiaUnavailable(NO_TOKEN_MESSAGE)
    root = download_gaia(split, token, revision=revision)
    return read_split_dir(find_split_dir(root, split))


def resolve_token() -> str | None:
    """``HF_TOKEN``, then ``HUGGING_FACE_HUB_TOKEN``, then a stored ``hf auth login``."""
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        if os.environ.get(name):
            return os.environ[name]
    return _stored_token()


def _stored_token() -> str | None:
    try:
        from huggingface_hub import get_token
    except ImportError:
        return None
    return get_token()


def download_gaia(split: Split, token: str, *, revision: str | None = None) -> Path:
    """Download ``2023/<split>/`` of the gated dataset; returns the snapshot root."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise GaiaUnavailable(
            "downloading GAIA needs huggingface_hub: pip install huggingface_hub, or pass --gaia-path DIR"
        ) from None
    try:
        root = snapshot_download(
            repo_id=GAIA_REPO_ID,
            repo_type="dataset",
            token=token,
            revision=revision,
            allow_patterns=[f"{GAIA_YEAR}/{split}/*"],
        )
    except Exception as exc:  # any Hub/network failure becomes one clear line
        raise GaiaUnavailable(hub_error_message(exc)) from None
    return Path(str(root))


def hub_error_message(exc: BaseException) -> str:
    """One line for a failed download, naming the fix."""
    name = type(exc).__name__
    if name == "GatedRepoError":
        return (
            f"GAIA is gated and this token has no access yet: accept the terms at {GAIA_URL} "
            "with the token's account, or pass --gaia-path DIR"
        )
    if name == "RepositoryNotFoundError" or "401" in str(exc):
        return (
            f"the Hugging Face Hub rejected the token for {GAIA_REPO_ID} ({name}): check HF_TOKEN "
            f"and accept the terms at {GAIA_URL}, or pass --gaia-path DIR"
        )
    lines = str(exc).strip().splitlines()
    detail = f"{name}: {lines[0][:200]}" if lines else name
    return f"could not download GAIA from the Hugging Face Hub ({detail}); retry, or pass --gaia-path DIR"


def find_split_dir(path: Path, split: Split) -> Path:
    """The folder holding ``split``'s metadata under ``path`` (see the module docstring)."""
    if not path.exists():
        raise GaiaUnavailable(
            f"GAIA path {path} does not exist: pass --gaia-path DIR with "
            f"{GAIA_YEAR}/{split}/metadata.parquet in it, or set HF_TOKEN to download GAIA"
        )
    if path.is_file():
        if path.name in METADATA_FILES:
            path = path.parent
        else:
            raise GaiaUnavailable(f"GAIA path {path} is a file; pass the dataset folder instead")
    for candidate in (path / GAIA_YEAR / split, path / split, path):
        if metadata_file(candidate) is None:
            continue
        if candidate == path and path.name in SPLITS and path.name != split:
            raise GaiaUnavailable(
                f"GAIA path {path} holds the {path.name} split, not {split}: pass the dataset root instead"
            )
        return candidate
    raise GaiaUnavailable(
        f"no GAIA metadata for the {split} split under {path}: expected "
        f"{GAIA_YEAR}/{split}/metadata.parquet or metadata.jsonl"
    )


def metadata_file(split_dir: Path) -> Path | None:
    """``metadata.parquet`` or else ``metadata.jsonl`` in ``split_dir``, if any."""
    for name in METADATA_FILES:
        if (split_dir / name).is_file():
            return split_dir / name
    return None


def read_split_dir(split_dir: Path) -> list[GaiaTask]:
    """Parse the metadata file in ``split_dir`` into tasks, checking every row."""
    meta = metadata_file(split_dir)
    if meta is None:
        raise GaiaUnavailable(f"no metadata.parquet or metadata.jsonl in {split_dir}")
    rows = _read_parquet(meta) if meta.suffix == ".parquet" else _read_jsonl(meta)
    if not rows:
        raise GaiaDataError(f"{meta}: no tasks")
    tasks: list[GaiaTask] = []
    seen: set[str] = set()
    for number, row in enumerate(rows, start=1):
        where = f"{meta} {'row' if meta.suffix == '.parquet' else 'line'} {number}"
        task = _task_from_row(row, split_dir, where)
        if task.task_id in seen:
            raise GaiaDataError(f"{meta}: duplicate task_id {task.task_id!r}")
        seen.add(task.task_id)
        tasks.append(task)
    return tasks


def _read_parquet(meta: Path) -> list[dict[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise GaiaUnavailable(f"reading {meta.name} needs pyarrow: pip install pyarrow") from None
    try:
        return pq.read_table(meta).to_pylist()
    except Exception as exc:  # pyarrow raises several types on bad files
        raise GaiaDataError(f"{meta}: not a readable Parquet file ({type(exc).__name__})") from None


def _read_jsonl(meta: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with meta.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise GaiaDataError(f"{meta} line {number}: invalid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise GaiaDataError(f"{meta} line {number}: expected a JSON object")
            rows.append(row)
    return rows


def _task_from_row(row: Mapping[str, Any], split_dir: Path, where: str) -> GaiaTask:
    missing = [column for column in REQUIRED_COLUMNS if column not in row]
    if missing:
        raise GaiaDataError(f"{where}: missing column(s) {', '.join(map(repr, missing))}")
    task_id = row["task_id"]
    if not isinstance(task_id, str) or not task_id.strip():
        raise GaiaDataError(f"{where}: task_id must be a non-empty string, got {task_id!r}")
    where = f"{where} (task {task_id})"
    metadata = _annotator_metadata(row.get("Annotator Metadata"))
    file_name = row.get("file_name") or None
    return GaiaTask(
        task_id=task_id,
        question=str(row["Question"] or ""),
        level=_parse_level(row["Level"], where),
        final_answer=_parse_final_answer(row["Final answer"]),
        file_name=file_name,
        file_path=_attachment_path(file_name, split_dir, where),
        annotator_steps=_parse_int(metadata.get("Number of steps")),
        annotator_tools=_parse_tools(metadata.get("Tools")),
        annotator_metadata=metadata,
    )


def _parse_level(value: Any, where: str) -> int:
    level: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        level = value
    elif isinstance(value, float) and value.is_integer():
        level = int(value)
    elif isinstance(value, str) and value.strip().isdigit():
        level = int(value.strip())
    if level is None or level < 1:
        raise GaiaDataError(f"{where}: Level {value!r} is not a positive integer")
    return level


def _parse_final_answer(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value)
    return None if text.strip() in ("", "?") else text


def _parse_int(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _parse_tools(value: Any) -> tuple[str, ...]:
    if isinstance(value, (list, tuple)):
        items = [str(item) for item in value]
    elif isinstance(value, str):
        items = value.splitlines()
    else:
        return ()
    tools = (_TOOL_PREFIX.sub("", item).strip() for item in items)
    return tuple(tool for tool in tools if tool and tool.lower() not in ("none", "n/a"))


def _annotator_metadata(value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


def _attachment_path(file_name: Any, split_dir: Path, where: str) -> Path | None:
    if file_name is None:
        return None
    if (
        not isinstance(file_name, str)
        or Path(file_name).name != file_name
        or file_name
        in (
            ".",
            "..",
        )
    ):
        raise GaiaDataError(f"{where}: file_name {file_name!r} is not a plain file name")
    path = split_dir / file_name
    if not path.is_file():
        raise GaiaDataError(f"{where}: attachment {file_name!r} is missing from {split_dir}")
    return path
