"""The results JSONL: problem lines in dataset order, then one summary line per suite.
Lines stream to `<out>.partial` while running; the final file replaces atomically."""

from __future__ import annotations

import functools
import json
import os
import re
import sys
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


class ResultsFile:
    """Streams finished problem lines to a partial file; `finalize` writes the real one."""

    def __init__(self) -> None:
        self.partial: Path | None = None
        self._handle: IO[str] | None = None

    def stream(self, path: Path, record: Mapping[str, Any]) -> None:
        if self._handle is None:
            self.partial = path.with_name(path.name + ".partial")
            self.partial.parent.mkdir(parents=True, exist_ok=True)
            self._handle = self.partial.open("w", encoding="utf-8")
        self._handle.write(_line(record))
        self._handle.flush()  # in the OS before the next item: survives SIGKILL

    def finalize(
        self, path: Path, records: Sequence[ProblemRecord], summaries: Sequence[Mapping[str, Any]]
    ) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        with temporary.open("w", encoding="utf-8") as handle:
            for record in records:
                handle.write(_line(record.to_dict()))
            for summary in summaries:
                handle.write(_line(summary))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
        self.close()
        if self.partial is not None and self.partial.exists():
            self.partial.unlink()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


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
