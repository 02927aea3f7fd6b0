"""The results JSONL: problem lines in dataset order, then one summary line per suite.
Lines stream to `<out>.partial` while running; the final file replaces atomically.

The finished lines are kept on disk, not in the controller's memory: in a private copy
(a file without a name beside the results, else in $TMPDIR, else compressed in memory),
read back by offset for the final file; the controller holds their offsets and what the
summaries need. The partial file is only a crash log, never read back.

Storage faults never cost finished work: a partial file that cannot be written stops
streaming (the private copy goes on), one deleted during the run is written again from
the still-open old one, and a final file that cannot be written goes to a rescue folder
in the temporary directory. Each says so in one note."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from pytest_agenteval.api.records import ProblemRecord, counted_tokens
from pytest_agenteval.datasets.jsonl import read_jsonl  # noqa: F401 - results files are read with it
from pytest_agenteval.output.spool import Spool

RESULTS_DIR = "agenteval-results"
_PACKAGES = (
    "pytest-agenteval",
    "pytest",
    "pytest-xdist",
    "pytest-asyncio",
    "datasets",
    "math-verify",
    "llama-cpp-python",
    "aiohttp",  # every request to an endpoint goes through it
    "numpy",
)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:80] or "model"


def default_out_path(suites: Iterable[str], model_label: str, started: float) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(started))
    name = "+".join(sorted(set(suites))) or "agenteval"
    # the pid: two runs started in the same second (a seed sweep) must not share a file
    return Path(RESULTS_DIR) / f"{name}-{_slug(model_label)}-{stamp}-{os.getpid()}.jsonl"


def check_writable(path: Path) -> None:
    """Fail at start-up, not after hours of generation: raises OSError. The folders it
    made for the probe are removed again: a run that writes nothing (every item deselected,
    a usage error later on) leaves no empty results folder; the writer makes them."""
    made = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        probe = path.parent / f".{path.name}.probe-{os.getpid()}"
        with probe.open("w"):
            pass
        probe.unlink()
    finally:
        for folder in made:  # innermost first
            with contextlib.suppress(OSError):  # another run's file is in it by now: it stays
                folder.rmdir()
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory")


def _line(data: Mapping[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, default=str) + "\n"


def rescue_path(path: Path) -> Path:
    """Where the final file goes when its own folder cannot take it: a new private folder
    (mode 0700) under $TMPDIR, so neither another user nor another run can take its place."""
    return Path(tempfile.mkdtemp(prefix="agenteval-rescue-")) / path.name


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


class ResultsFile:
    """Keeps the finished problem lines of a run, each under a key, and streams them to
    the partial file; `finalize` writes the real file.

    The partial file is a crash log, written and never read back: it is a file in the
    user's folder that someone may truncate, edit or delete, or that a second run with the
    same --agenteval-out may write too. The lines are read back from a private copy, a
    file without a name beside it (the same disk), else in $TMPDIR, else in memory
    (compressed) when no disk takes them."""

    def __init__(self) -> None:
        self.partial: Path | None = None
        self._spool: Spool | None = None  # the partial file (the crash log)
        self._stopped = False  # the partial file takes no more lines
        self._store: Spool | None = None  # where lines are appended to be read back
        self._stores: list[tuple[Spool, str]] = []  # every store opened, with its place
        self._places: list[Path | None] | None = None  # where a store may still go
        self._where: dict[str, tuple[Spool, int, int] | bytes] = {}
        self.notes: list[str] = []  # storage problems, one line each

    def stream(self, path: Path, key: str, record: Mapping[str, Any]) -> None:
        """Keep one finished problem line, and stream it to the partial file `path` +
        ".partial"."""
        data = _line(record).encode("utf-8")
        self._where[key] = self._keep(path, data)
        if self._stopped:
            return
        try:
            self._to_partial(path, data)
        except OSError as exc:
            self._stopped = True
            self.notes.append(
                f"could not write the partial results file {self.partial} ({_why(exc)}); "
                "the run goes on and keeps the finished items for the final file"
            )

    def _keep(self, path: Path, data: bytes) -> tuple[Spool, int, int] | bytes:
        if self._places is None:
            self._places = [path.parent, None]  # beside the results, then $TMPDIR
        while True:
            if self._store is None:
                if not self._places:
                    return zlib.compress(data, 1)  # no disk takes it
                place = self._places.pop(0)
                try:
                    self._store = Spool.private(place)
                except OSError:
                    continue
                self._stores.append((self._store, "beside" if place is not None else "temporary"))
            try:
                return self._store, self._store.append(data), len(data)
            except OSError:
                self._store = None  # its disk is full: the next place (earlier lines stay readable)

    def _to_partial(self, path: Path, data: bytes) -> None:
        if self._spool is None:
            self.partial = path.with_name(path.name + ".partial")
            self._spool = Spool.create(self.partial)
        elif self._spool.deleted():
            count = self._spool.recreate() + 1
            self._spool.append(data)
            self.notes.append(
                f"the partial results file {self.partial} was deleted during the run; "
                f"it was written again with the {count} items finished so far"
            )
            return
        self._spool.append(data)

    def stored_in(self, key: str) -> str:
        """ "beside" (a private file in the results folder), "temporary" (one in $TMPDIR)
        or "memory": where a line is kept to be read back."""
        where = self._where[key]
        if isinstance(where, bytes):
            return "memory"
        return next(place for spool, place in self._stores if spool is where[0])

    def read(self, key: str) -> dict[str, Any]:
        """The line kept under `key`, as it was written."""
        where = self._where[key]
        data = zlib.decompress(where) if isinstance(where, bytes) else where[0].read(where[1], where[2])
        return json.loads(data)

    def finalize(
        self,
        path: Path,
        records: Sequence[ProblemRecord],
        summaries: Sequence[Mapping[str, Any]],
        recover_hint: str = "",
    ) -> Path | None:
        """Write the final file (or its rescue copy); the path written, None if neither.
        `records` may read their lines back from here (`StoredRecords`): one at a time."""

        def lines() -> Iterator[str]:
            for record in records:
                yield _line(record.to_dict())
            for summary in summaries:
                yield _line(summary)

        failures: list[str] = []
        written: Path | None = None
        for target in (path, None):
            try:
                if target is None:  # made only when needed
                    target = rescue_path(path)
                _write_atomically(target, lines())
                written = target
                break
            except OSError as exc:
                failures.append(f"{target} ({_why(exc)})")
        self.close()
        if written == path:
            if self.partial is not None:
                _unlink_quietly(self.partial)
            return written
        self.notes[:] = [n for n in self.notes if "partial results file" not in n]  # said below
        if written is not None:
            self.notes.append(
                f"could not write the results file {failures[0]}; wrote it to {written} instead"
            )
        else:
            kept = ""
            if self.partial is not None:
                kept = f"the {self._partial_lines()} items streamed to {self.partial} and "
            self.notes.append(
                f"could not write the results file {failures[0]} nor {failures[1]}; "
                f"{kept}{recover_hint or 'nothing else'} keep the finished work"
            )
        return written

    def _partial_lines(self) -> int:
        try:
            with self.partial.open("rb") as handle:  # type: ignore[union-attr]
                return sum(1 for _ in handle)
        except OSError:
            return 0

    def close(self) -> None:
        for spool in [self._spool, *(spool for spool, _ in self._stores)]:
            if spool is not None:
                spool.close()


class StoredRecords(Sequence[ProblemRecord]):
    """Problem records whose lines `ResultsFile` keeps, read back when asked for (so the
    texts of a run are never all in memory at once); `decode` makes a line a record."""

    def __init__(
        self,
        results: ResultsFile,
        keys: Sequence[str],
        decode: Callable[[Mapping[str, Any]], ProblemRecord],
    ) -> None:
        self._results = results
        self._keys = list(keys)
        self._decode = decode

    def __len__(self) -> int:
        return len(self._keys)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return StoredRecords(self._results, self._keys[index], self._decode)
        return self._decode(self._results.read(self._keys[index]))


def _write_atomically(path: Path, lines: Iterable[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with temporary.open("w", encoding="utf-8") as handle:
            handle.writelines(lines)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:  # a disk error, or one reading the lines back: no stray copy
        _unlink_quietly(temporary)  # a half-written copy would only take space
        raise


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def package_versions() -> dict[str, str]:
    return dict(_package_versions())


@functools.cache  # read once per process (a metadata scan), warmed during the run
def _package_versions() -> dict[str, str]:
    versions = {"python": sys.version.split()[0]}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def not_scored_reason(scored: int, errored: int, missing: int) -> str | None:
    """The summary's `not_scored`, why its metrics are null: None when something was
    scored, else e.g. `0 of 2 problems scored: 2 errored, 0 missing`."""
    if scored:
        return None
    return f"0 of {scored + errored + missing} problems scored: {errored} errored, {missing} missing"


def incomplete_reason(items: int, errored: int, missing: int, interrupted: bool) -> str | None:
    """The summary's `incomplete`: None for a complete run, else what is missing from it,
    e.g. `2 of 30 problems errored, 1 missing`, the same line everywhere it is flagged."""
    if not (errored or missing or interrupted):
        return None
    line = f"{errored} of {items} problems errored, {missing} missing"
    return line + ", interrupted" if interrupted else line


def token_totals(records: Sequence[ProblemRecord]) -> dict[str, int]:
    """The run's tokens: the sum of the requests' usage (a request of `n` samples once).
    One generation at a time: a merge's records unpack theirs when read."""
    prompt = completion = 0
    for record in records:
        for generation in record.generations:
            p, c = counted_tokens(generation.rollout)
            prompt, completion = prompt + p, completion + c
    return {"prompt": prompt, "completion": completion}


def request_totals(records: Sequence[ProblemRecord]) -> dict[str, int]:
    totals = {"generations": 0, "attempts": 0, "retries": 0, "cached_generations": 0}
    for record in records:  # of every record, errored ones too (the cache line's)
        for generation in record.generations:  # one at a time, as token_totals
            totals["generations"] += 1
            totals["attempts"] += generation.rollout.attempts
            totals["retries"] += generation.rollout.retries
            totals["cached_generations"] += generation.rollout.cached
    return totals
