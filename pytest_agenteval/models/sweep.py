"""The models of a checkpoint sweep: every `--model-path` value (repeatable, globs allowed,
`LABEL=PATH` naming one, `LABEL@STEP=PATH` giving its training step), expanded into
labelled models in the order the run evaluates them. A run is a sweep when it has more
than one model; the FIRST model is the reference the comparisons are made against."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_agenteval.models.steps import split_step, step_of

LABEL_PATTERN = re.compile(r"^[A-Za-z0-9._-]+$")
_GLOB_CHARACTERS = re.compile(r"[*?\[]")
_NUMBER = re.compile(r"(\d+)")


@dataclass(frozen=True)
class SweepModel:
    """One model of a sweep: its label (item ids `LABEL:ID`, marker `model_LABEL`, results
    file, summary block) and the `--model-path` value that names it (a path, a hub id)."""

    label: str
    source: str
    # the training step (`LABEL@STEP=PATH`, else from the label), for the trackers' step axis;
    # not part of the model's identity (equality)
    step: int | None = field(default=None, compare=False)


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key with digit runs compared as numbers: step-100 < step-200 < step-1000."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in _NUMBER.split(text) if part)


def is_glob(value: str) -> bool:
    return bool(_GLOB_CHARACTERS.search(value))


def label_of(source: str) -> str:
    """The label a source gets unless named: the file's stem (`step-200.gguf` -> `step-200`),
    the folder's name, a hub id's last part (`Qwen/Qwen3-8B` -> `Qwen3-8B`)."""
    name = source.rstrip("/").rsplit("/", 1)[-1]
    return name[: -len(".gguf")] if name.endswith(".gguf") else name


def marker_name(label: str) -> str:
    """The marker of a model's items: `model_` + the label, non-identifier characters as `_`
    (`step-200` -> `model_step_200`), for `-m model_step_200`."""
    return "model_" + re.sub(r"\W", "_", label)


def item_label(nodeid: str, labels: Sequence[str]) -> str | None:
    """The sweep model an item belongs to, by its node id (`...::test_aime25[step-200:12]`
    -> `step-200`); None: an item of no model in `labels`."""
    return next((label for label in labels if f"[{label}:" in nodeid), None)


def _split_label(value: str) -> tuple[str | None, str, int | None]:
    """`LABEL=PATH` -> (LABEL, PATH, None), `LABEL@STEP=PATH` -> (LABEL, PATH, STEP); a value
    without a label part -> (None, value, None)."""
    label, sep, rest = value.partition("=")
    name, step = split_step(label)
    if sep and rest and "/" not in label and LABEL_PATTERN.match(name):
        return name, rest, step
    return None, value, None


def expand_model_paths(values: Sequence[str]) -> list[SweepModel]:
    """The models the `--model-path` values name, in order: each value's glob matches
    naturally sorted; `LABEL=PATH` labels one model. Raises ValueError with one line
    naming the fix (a glob matching nothing, a bad or repeated label)."""
    models: list[SweepModel] = []
    for value in values:
        label, source, step = _split_label(value)
        if is_glob(source):
            matches = sorted(glob.glob(os.path.expanduser(source)), key=natural_key)
            if not matches:
                raise ValueError(f"--model-path {value}: the glob matches nothing; fix the pattern")
            if label is not None and len(matches) > 1:
                raise ValueError(
                    f"--model-path {value}: one label for {len(matches)} models; drop {label}= "
                    "(each model is labelled by its name) or name one path per label"
                )
            models.extend(_stepped(label or label_of(m), m, step) for m in matches)
        else:
            models.append(_stepped(label or label_of(source), source, step))
    seen: dict[str, str] = {}
    markers: dict[str, str] = {}  # marker -> the label it came from
    for model in models:
        if not LABEL_PATTERN.match(model.label):
            raise ValueError(
                f"--model-path {model.source}: label {model.label!r} has characters other than "
                "A-Z a-z 0-9 . _ -; name it with --model-path LABEL=PATH"
            )
        if model.label in seen:
            raise ValueError(
                f"--model-path: {seen[model.label]} and {model.source} both have the label "
                f"{model.label!r}; name one with --model-path LABEL=PATH"
            )
        seen[model.label] = model.source
        if marker_name(model.label) in markers:  # `-m model_step_200` would select both
            raise ValueError(
                f"--model-path: the labels {markers[marker_name(model.label)]!r} and {model.label!r} "
                f"share the marker {marker_name(model.label)} (-m would select both); rename one with "
                "--model-path LABEL=PATH"
            )
        markers[marker_name(model.label)] = model.label
    return models


def _stepped(label: str, source: str, step: int | None) -> SweepModel:
    """The model with its training step: the one given (`LABEL@STEP=PATH`), else its label's."""
    return SweepModel(label, source, step if step is not None else step_of(label))


def absolute(model: SweepModel) -> SweepModel:
    """The model with an existing path made absolute (xdist workers may start elsewhere);
    a hub id stays as given."""
    path = Path(model.source).expanduser()
    if not path.exists():
        return model
    return SweepModel(model.label, str(path.resolve()), model.step)
