"""Where the generation cache lives, and what `pytest-agenteval cache info | prune | clear`
does to it.

`--agenteval-cache-dir`, else `$AGENTEVAL_CACHE_DIR`, else the user's cache folder
(`$XDG_CACHE_HOME/pytest-agenteval` through platformdirs), as pip's and the hub's caches
live; never pytest's rootdir, which moves with how a path option is spelled. Paid
generations are then reused across checkouts, folders and CI jobs (one folder to restore
with a CI's cache step). The folder takes any number of runs at once: segments are only
appended to (models/cache.py) or removed whole, so no reader ever sees half an entry."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import sys
import time
from pathlib import Path

from pytest_agenteval.models.cache import KEY_LENGTH

CACHE_ENV = "AGENTEVAL_CACHE_DIR"
APP_NAME = "pytest-agenteval"


def cache_directory(option: str | None = None) -> Path:
    """The cache folder: `option` (--agenteval-cache-dir), else $AGENTEVAL_CACHE_DIR, else the
    user cache folder, as pip's and the hub's caches live ($XDG_CACHE_HOME/pytest-agenteval
    on Linux, ~/Library/Caches/pytest-agenteval on macOS)."""
    chosen = option or os.environ.get(CACHE_ENV, "")
    if chosen:
        return Path(chosen).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


@dataclasses.dataclass(frozen=True)
class CacheUsage:
    """What `pytest-agenteval cache info` shows of one folder."""

    directory: Path
    segments: int  # generation segments (one a writing process)
    entries: int  # distinct keys among their whole lines
    generation_bytes: int
    total_bytes: int  # everything in the folder (hash and batch ledgers, SDK homes...)
    oldest: float | None  # the oldest segment's last write (epoch seconds)
    newest: float | None


def _segments(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.jsonl") if p.is_file())


def usage(directory: Path) -> CacheUsage:
    segments = _segments(directory)
    keys: set[bytes] = set()
    times = []
    generation_bytes = 0
    for segment in segments:
        try:
            stat = segment.stat()
            with segment.open("rb") as handle:
                keys.update(line[:KEY_LENGTH] for line in handle if line.endswith(b"\n"))
        except OSError:  # removed by a prune meanwhile
            continue
        times.append(stat.st_mtime)
        generation_bytes += stat.st_size
    total = 0
    for path in directory.rglob("*") if directory.is_dir() else ():
        with contextlib.suppress(OSError):
            if path.is_file() and not path.is_symlink():
                total += path.stat().st_size
    return CacheUsage(
        directory,
        len(times),
        len(keys),
        generation_bytes,
        total,
        min(times, default=None),
        max(times, default=None),
    )


def prune(directory: Path, older_than_s: float, now: float | None = None) -> tuple[int, int]:
    """Remove the generation segments last written more than `older_than_s` ago: (segments,
    bytes) removed. A segment goes whole (one unlink): a run reading the folder meanwhile
    requests those generations again, never reads half of one; one being written is recent."""
    cutoff = (time.time() if now is None else now) - older_than_s
    removed = freed = 0
    for segment in _segments(directory):
        try:
            stat = segment.stat()
            if stat.st_mtime >= cutoff:
                continue
            segment.unlink()
        except OSError:
            continue
        removed += 1
        freed += stat.st_size
    return removed, freed


def clear(directory: Path) -> int:
    """Remove everything in the cache folder (the folder stays): the bytes freed."""
    freed = usage(directory).total_bytes
    for path in list(directory.iterdir()) if directory.is_dir() else ():
        with contextlib.suppress(OSError):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
    return freed


# -- `pytest-agenteval cache info | prune | clear` ------------------------------------
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
USAGE_ERROR = 2


def parse_age(text: str) -> float:
    """`30d`, `12h`, `90m`, `45s`, `2w` in seconds; ValueError names the problem."""
    number, unit = text[:-1], text[-1:].lower()
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in _UNITS or not number or value < 0:
        raise ValueError(f"--older-than {text!r}: give a number and a unit, e.g. 30d, 12h, 90m, 45s or 2w")
    return value * _UNITS[unit]


def _size(count: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000  # type: ignore[assignment]
    return f"{count} B"  # unreachable


def _where(option: str | None) -> str:
    if option:
        return "--agenteval-cache-dir"
    return f"${CACHE_ENV}" if os.environ.get(CACHE_ENV) else "the user cache folder"


def _day(epoch: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch)) if epoch is not None else "-"


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="pytest-agenteval cache",
        description="The generation cache: where it is and how big (info), remove old generations "
        "(prune --older-than 30d) or everything (clear). Folder: --agenteval-cache-dir, else "
        f"${CACHE_ENV}, else the user cache folder ($XDG_CACHE_HOME/{APP_NAME}).",
    )
    parser.add_argument("action", choices=("info", "prune", "clear"))
    parser.add_argument("--agenteval-cache-dir", dest="cache_dir", default=None, metavar="DIR")
    parser.add_argument("--older-than", default=None, metavar="AGE", help="prune: e.g. 30d, 12h, 2w")
    args = parser.parse_args(argv)
    directory = cache_directory(args.cache_dir)
    if (args.older_than is None) == (args.action == "prune"):
        need = "give --older-than AGE, e.g. 30d" if args.action == "prune" else "--older-than is for prune"
        print(f"pytest-agenteval cache {args.action}: {need}", file=sys.stderr)
        return USAGE_ERROR
    if args.action == "prune":
        try:
            age = parse_age(args.older_than)
        except ValueError as exc:
            print(f"pytest-agenteval cache prune: {exc}", file=sys.stderr)
            return USAGE_ERROR
        removed, freed = prune(directory, age)
        print(f"pruned {removed} segment(s), {_size(freed)}, last written over {args.older_than} ago")
    elif args.action == "clear":
        print(f"cleared {directory}: {_size(clear(directory))} freed")
    found = usage(directory)
    print(f"cache folder: {directory} ({_where(args.cache_dir)})")
    print(
        f"generations:  {found.entries} entries in {found.segments} segment(s), "
        f"{_size(found.generation_bytes)} (written {_day(found.oldest)} .. {_day(found.newest)})"
    )
    print(f"total:        {_size(found.total_bytes)} (with model hashes, batch ledgers, SDK homes)")
    return 0
