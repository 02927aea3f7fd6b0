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
import math
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from pytest_agenteval.models.cache import KEY_LENGTH, segment_in_use

CACHE_ENV = "AGENTEVAL_CACHE_DIR"
APP_NAME = "pytest-agenteval"
INI_KEY = "agenteval_cache_dir"
# What the cache writes in its folder, and nothing else: the segments (models/cache.py,
# `<host>-<pid>-<8 hex>.jsonl`), the weights' hashes (models/serve/resolve.py), the batch
# ledger (models/cost/batch.py), datagen's nonce key and the SDK samplers' home.
_SEGMENT = re.compile(r".+-\d+-[0-9a-f]{8}\.jsonl")
_OWN = re.compile(r"model-hashes\.(?:json|tmp)|batches\.(?:json|lock|\d+\.tmp)|datagen-nonce\.key|sdk-home")


def cache_directory(option: str | None = None) -> Path:
    """The cache folder: `option` (--agenteval-cache-dir), else $AGENTEVAL_CACHE_DIR, else the
    user cache folder, as pip's and the hub's caches live ($XDG_CACHE_HOME/pytest-agenteval
    on Linux, ~/Library/Caches/pytest-agenteval on macOS)."""
    chosen = option or os.environ.get(CACHE_ENV, "")
    if chosen:
        return Path(chosen).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def from_ini(value: str, ini_file: Path | None) -> str:
    """An ini file's `agenteval_cache_dir`: a relative one is relative to the ini file's
    folder (pytest's rootdir), not to the folder pytest runs in."""
    path = Path(value).expanduser()
    return str(path if path.is_absolute() or ini_file is None else ini_file.parent / path)


def run_cache_directory(config: Any, settings: Any) -> Path | None:
    """A run's cache folder (None with --agenteval-no-cache): --agenteval-cache-dir, else
    the ini key (relative to the ini file), else $AGENTEVAL_CACHE_DIR, else the user cache
    folder; never under pytest's rootdir, which moves with how a path option is spelled."""
    if settings.no_cache:
        return None
    chosen = settings.cache_dir
    if chosen and config.getoption("agenteval_cache_dir", None) is None:  # the ini's
        chosen = from_ini(chosen, config.inipath)
    return cache_directory(chosen)


def _project_ini() -> tuple[str, Path] | None:
    """The `agenteval_cache_dir` of the ini file pytest would read in this folder (pytest.ini,
    pyproject.toml, tox.ini or setup.cfg here or above), with that file; None where none."""
    try:
        from _pytest.config.findpaths import locate_config  # pytest's own search

        found = locate_config(Path.cwd(), [])
        ini_file, values = found[1], found[2]
    except Exception:  # another pytest's private layout, an unreadable file: no ini
        return None
    raw = (values or {}).get(INI_KEY)
    value = getattr(raw, "value", raw)  # pytest 9: a ConfigValue
    return (str(value).strip(), ini_file) if value and str(value).strip() and ini_file else None


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
    return sorted(p for p in directory.glob("*.jsonl") if p.is_file() and _SEGMENT.fullmatch(p.name))


def _own(path: Path) -> bool:
    return bool(_SEGMENT.fullmatch(path.name) or _OWN.fullmatch(path.name))


def _in_use(path: Path) -> bool:
    """What `clear` leaves: the batch ledger (batches submitted and paid for, not yet collected:
    removing it pays for them again), files being written (`*.tmp`), and a segment a running
    process still writes (it holds a lock on it: models/cache.py hold_segment)."""
    if path.name.startswith("batches.") or path.name.endswith(".tmp"):
        return True
    return bool(_SEGMENT.fullmatch(path.name)) and segment_in_use(path)


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


class NotACache(ValueError):
    """A folder that holds no file of the cache's and others: `clear` removes nothing."""


def clear(directory: Path) -> tuple[int, int]:
    """Remove the cache's own files from its folder (the folder and anything else in it
    stay): (bytes freed, entries kept). A folder that holds other entries and nothing of
    the cache's is refused (NotACache): `AGENTEVAL_CACHE_DIR=.` in a project is not a cache."""
    entries = sorted(directory.iterdir()) if directory.is_dir() else []
    own = [path for path in entries if _own(path)]
    others = [path for path in entries if not _own(path)]
    if others and not own:
        shown = ", ".join(p.name for p in others[:3]) + (
            f" and {len(others) - 3} more" if len(others) > 3 else ""
        )
        raise NotACache(
            f"{directory} does not look like a generation cache folder (it holds {shown} and no cache "
            "segment): nothing removed; give the cache's folder with --agenteval-cache-dir DIR"
        )
    freed = 0
    for path in own:
        if _in_use(path):
            continue
        with contextlib.suppress(OSError):
            if path.is_dir() and not path.is_symlink():
                freed += sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())
                shutil.rmtree(path)
            else:
                freed += path.stat().st_size
                path.unlink()
    return freed, len(others)


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
    if unit not in _UNITS or not number or not math.isfinite(value * _UNITS.get(unit, 1)) or value < 0:
        raise ValueError(f"--older-than {text!r}: give a number and a unit, e.g. 30d, 12h, 90m, 45s or 2w")
    return value * _UNITS[unit]


def _size(count: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000  # type: ignore[assignment]
    return f"{count} B"  # unreachable


def _located(option: str | None) -> tuple[Path, str]:
    """The folder `pytest-agenteval cache` manages and why that one: as a run in this folder
    would choose it (--agenteval-cache-dir, the project's ini key, $AGENTEVAL_CACHE_DIR, the
    user cache folder)."""
    if option:
        return cache_directory(option), "--agenteval-cache-dir"
    ini = _project_ini()
    if ini is not None:
        return cache_directory(from_ini(*ini)), f"ini key {INI_KEY} in {ini[1]}"
    if os.environ.get(CACHE_ENV):
        return cache_directory(), f"${CACHE_ENV}"
    return cache_directory(), "the user cache folder"


def _day(epoch: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(epoch)) if epoch is not None else "-"


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="pytest-agenteval cache",
        description="The generation cache: where it is and how big (info), remove old generations "
        "(prune --older-than 30d) or all of the cache's files (clear). Folder: --agenteval-cache-dir, "
        f"else the ini key {INI_KEY} of this folder's pytest ini file (relative to that file), else "
        f"${CACHE_ENV}, else the user cache folder ($XDG_CACHE_HOME/{APP_NAME}).",
    )
    parser.add_argument("action", choices=("info", "prune", "clear"))
    parser.add_argument("--agenteval-cache-dir", dest="cache_dir", default=None, metavar="DIR")
    parser.add_argument("--older-than", default=None, metavar="AGE", help="prune: e.g. 30d, 12h, 2w")
    args = parser.parse_args(argv)
    directory, why = _located(args.cache_dir)
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
        try:
            freed, kept = clear(directory)
        except NotACache as exc:
            print(f"pytest-agenteval cache clear: {exc}", file=sys.stderr)
            return USAGE_ERROR
        other = f"; kept {kept} entries the cache never writes" if kept else ""
        print(f"cleared {directory}: {_size(freed)} freed{other}")
    found = usage(directory)
    print(f"cache folder: {directory} ({why})")
    print(
        f"generations:  {found.entries} entries in {found.segments} segment(s), "
        f"{_size(found.generation_bytes)} (written {_day(found.oldest)} .. {_day(found.newest)})"
    )
    print(f"total:        {_size(found.total_bytes)} (with model hashes, batch ledgers, SDK homes)")
    return 0
