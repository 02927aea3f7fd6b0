"""The results JSONL: problem lines in dataset order, then one summary line per suite.
Lines stream to `<out>.partial` while running; the final file replaces atomically.

Storage faults never cost finished work: a partial file that cannot be written stops
streaming (the records stay in memory), one deleted during the run is written again
from memory, and a final file that cannot be written goes to a rescue folder in the
temporary directory. Each says so in one note."""

from __future__ import annotations

import functools
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import IO, Any

from .records import ProblemRecord

RESULTS_DIR = "agenteval-results"
_PACKAGES = (
    "pytest-agenteval",
    "pytest",
    "pytest-xdist",
    "pytest-asyncio",
    "datasets",
    "math-verify",
    "llama-cpp-python",
    "aiohttp",
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
    """Fail at start-up, not after hours of generation: raises OSError."""
    path.parent.mkdir(parents=True, exist_ok=True)
    probe = path.parent / f".{path.name}.probe-{os.getpid()}"
    with probe.open("w"):
        pass
    probe.unlink()
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory")


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


def _line(data: Mapping[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, default=str) + "\n"


def rescue_path(path: Path) -> Path:
    """Where the final file goes when its own folder cannot take it: a new private folder
    (mode 0700) under $TMPDIR, so neither another user nor another run can take its place."""
    return Path(tempfile.mkdtemp(prefix="agenteval-rescue-")) / path.name


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


class ResultsFile:
    """Streams finished problem lines to a partial file; `finalize` writes the real one."""

    def __init__(self) -> None:
        self.partial: Path | None = None
        self._handle: IO[str] | None = None
        self._stopped = False
        self.notes: list[str] = []  # storage problems, one line each

    def stream(
        self, path: Path, record: Mapping[str, Any], so_far: Callable[[], Iterable[Mapping[str, Any]]]
    ) -> None:
        """Append one finished record; `so_far` gives every record streamed, this one
        included, to write the file again if someone deleted it."""
        if self._stopped:
            return
        try:
            if self._handle is None:
                self.partial = path.with_name(path.name + ".partial")
                self.partial.parent.mkdir(parents=True, exist_ok=True)
                self._handle = self.partial.open("w", encoding="utf-8")
            elif os.fstat(self._handle.fileno()).st_nlink == 0:
                count = self._rewrite(so_far())
                self.notes.append(
                    f"the partial results file {self.partial} was deleted during the run; "
                    f"it was written again with the {count} items finished so far"
                )
                return
            self._handle.write(_line(record))
            self._handle.flush()  # in the OS before the next item: survives SIGKILL
        except OSError as exc:
            self._stopped = True
            self.close()
            self.notes.append(
                f"could not write the partial results file {self.partial} ({_why(exc)}); "
                "the run goes on and keeps the finished items in memory for the final file"
            )

    def _rewrite(self, records: Iterable[Mapping[str, Any]]) -> int:
        assert self.partial is not None
        self.close()
        self.partial.parent.mkdir(parents=True, exist_ok=True)  # the folder may be gone too
        self._handle = self.partial.open("w", encoding="utf-8")
        count = 0
        for record in records:
            self._handle.write(_line(record))
            count += 1
        self._handle.flush()
        return count

    def finalize(
        self,
        path: Path,
        records: Sequence[ProblemRecord],
        summaries: Sequence[Mapping[str, Any]],
        recover_hint: str = "",
    ) -> Path | None:
        """Write the final file (or its rescue copy); the path written, None if neither."""
        lines = [_line(record.to_dict()) for record in records] + [_line(s) for s in summaries]
        self.close()
        failures: list[str] = []
        written: Path | None = None
        for target in (path, None):
            try:
                if target is None:  # made only when needed
                    target = rescue_path(path)
                _write_atomically(target, lines)
                written = target
                break
            except OSError as exc:
                failures.append(f"{target} ({_why(exc)})")
        if written == path and self.partial is not None:
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
        if self._handle is not None:
            try:
                self._handle.close()
            except OSError:
                pass  # the disk took no more: what is already there stays
            self._handle = None


def _write_atomically(path: Path, lines: Sequence[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with temporary.open("w", encoding="utf-8") as handle:
            handle.writelines(lines)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError:
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


def token_totals(records: Sequence[ProblemRecord]) -> dict[str, int]:
    generations = [g for r in records for g in r.generations]
    return {
        "prompt": sum(g.rollout.prompt_tokens for g in generations),
        "completion": sum(g.rollout.completion_tokens for g in generations),
    }


def request_totals(records: Sequence[ProblemRecord]) -> dict[str, int]:
    generations = [g for r in records for g in r.generations]
    return {
        "attempts": sum(g.rollout.attempts for g in generations),
        "retries": sum(g.rollout.retries for g in generations),
        "cached_generations": sum(g.rollout.cached for g in generations),
    }
