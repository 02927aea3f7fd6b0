"""`replay:PATH`: re-score recorded generations without a model."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_agenteval.api.sampler import ModelIdentity, SamplerError
from pytest_agenteval.datasets.jsonl import read_jsonl

PREFIX = "replay:"


class ReplayError(SamplerError):
    pass


class ReplaySource:
    """Generations keyed by (problem id, sample index), read from either
    `{"problem_id", "sample_index", "text"}` lines or our own results file (its problem
    lines: the summary and a tracker's marker lines are skipped)."""

    native_tools = False

    def __init__(self, path: Path) -> None:
        from pytest_agenteval.models.backends.llama import (
            file_fingerprint,  # not at import: endpoint runs never load _llama
        )

        self.path = path
        self._samples = _load(path)
        self.identity = ModelIdentity(
            backend="replay",
            name=f"replay-{path.stem}",
            location=str(path),
            fingerprint=file_fingerprint(path),
        )

    def sample_count(self, problem_id: Any) -> int:
        return len(self._samples.get(str(problem_id), {}))

    def generation(self, problem_id: Any, sample_index: int) -> Mapping[str, Any]:
        try:
            return self._samples[str(problem_id)][sample_index]
        except KeyError:
            raise ReplayError(
                f"{self.path}: no recorded generation for problem {problem_id!r} sample {sample_index}"
            ) from None


def _load(path: Path) -> dict[str, dict[int, Mapping[str, Any]]]:
    if not path.is_file():
        raise ReplayError(f"replay file {path} does not exist; give an existing JSONL file")
    samples: dict[str, dict[int, Mapping[str, Any]]] = defaultdict(dict)

    def bad_line(number: int, exc: json.JSONDecodeError) -> Exception:
        return ReplayError(f"{path}:{number}: not valid JSON ({exc.msg})")

    for number, row in read_jsonl(path, bad_line):
        if row.get("type") == "problem":
            for generation in row.get("generations", ()):
                samples[str(row["problem_id"])][int(generation["sample_index"])] = generation
            continue
        if row.get("type") in ("summary", "tracker"):  # a results file's other lines: not generations
            continue
        missing = {"problem_id", "sample_index", "text"} - row.keys()
        if missing:
            raise ReplayError(
                f"{path}:{number}: replay lines need problem_id, sample_index and text "
                f"(missing {', '.join(sorted(missing))})"
            )
        samples[str(row["problem_id"])][int(row["sample_index"])] = row
    if not samples:
        raise ReplayError(f"{path}: no generations found")
    return dict(samples)
