"""What `pytest-agenteval merge` refuses, one line each: a file that is not a shard's,
shards of different splits, configurations, models, data or selections, and a missing,
duplicated or conflicting shard."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agenteval.config.table import OPTIONS
from pytest_agenteval.output.summary import VOLATILE_MODEL_FIELDS, selection_hash
from pytest_agenteval.tasks.registry import suite_by_name


class MergeError(ValueError):
    """The shards cannot be merged; the message is one line with the fix."""


@dataclass
class ShardFile:
    path: Path
    summaries: list[dict[str, Any]] = field(default_factory=list)
    records: list[str] = field(default_factory=list)  # the nodeids of its problem lines

    @property
    def shard(self) -> dict[str, Any]:
        return self.summaries[0]["shard"]

    @property
    def config(self) -> dict[str, Any]:
        return self.summaries[0].get("config") or {}

    @property
    def label(self) -> str:
        return f"{self.path} (shard {self.shard['index']}/{self.shard['count']})"


def check_shards(shards: Sequence[ShardFile]) -> ShardFile:
    """Refuses what cannot be merged (MergeError); the shards are then one evaluation's,
    every one present once. Returns the first shard (by index)."""
    for shard in shards:
        _check_is_shard(shard)
    first = shards[0]
    for other in shards[1:]:
        _check_same(first, other)
    by_index = _check_indices(shards)
    _check_items(by_index, first.shard)
    for shard in shards:
        items = set(shard.shard["items"])
        stray = next((n for n in shard.records if n not in items), None)
        if stray is not None:
            raise MergeError(
                f"{shard.label} holds {stray}, which is not one of its items: a conflicting shard"
            )
    return by_index[0]


def _check_is_shard(shard: ShardFile) -> None:
    if not shard.summaries:
        raise MergeError(
            f"{shard.path}: no summary line: not a finished run's results file (a .partial file?); "
            "rerun that shard (the generation cache regenerates nothing finished)"
        )
    objects = [s.get("shard") for s in shard.summaries]
    if not all(isinstance(o, Mapping) for o in objects):
        raise MergeError(
            f"{shard.path}: not a shard's results file (no shard object in its summary); merge the results "
            "files of runs with --agenteval-shard I/N"
        )
    if any(o["index"] != objects[0]["index"] or o["count"] != objects[0]["count"] for o in objects):
        raise MergeError(f"{shard.path}: its summaries name different shards; is it two files joined?")


ALLOW = "--allow-version-change"


def installed_versions(names: Iterable[str]) -> dict[str, str]:
    """The version of each suite as installed here (what a merge recomputes with)."""
    return {name: suite_by_name(name).version for name in names}


def versions_of(names: Iterable[str], args: Any) -> dict[str, Any]:
    """`check_baseline`'s version arguments in a merge."""
    return {
        "versions": installed_versions(names),
        "allow_version_change": args.allow_version_change,
        "flag": ALLOW,
    }


def say(notes: Sequence[str]) -> None:
    for note in notes:
        print(f"pytest-agenteval merge: {note}", file=sys.stderr)


def check_versions(shards: Sequence[ShardFile], allow: bool) -> list[str]:
    """Shards of one suite ran one version of it; merging recomputes the metrics with the
    installed suite, so another installed version is refused unless `allow` (then the
    returned lines say so). A shard from before versions (no suite_version) is not checked."""
    installed = installed_versions({s["suite"] for shard in shards for s in shard.summaries})
    seen: dict[str, tuple[str, ShardFile]] = {}
    notes = []
    unversioned: list[tuple[ShardFile, str]] = []
    for shard in shards:
        for summary in shard.summaries:
            name, version = summary["suite"], summary.get("suite_version")
            if version is None:
                unversioned.append((shard, name))
                continue
            if name in seen and seen[name][0] != version:
                raise MergeError(
                    f"{seen[name][1].label} and {shard.label} ran {name} version {seen[name][0]} and "
                    f"version {version}; merge the shards of one version"
                )
            seen.setdefault(name, (version, shard))
    for name, (version, _) in sorted(seen.items()):
        mine = installed.get(name)
        if mine is None or mine == version:
            continue
        said = f"the shards ran {name} version {version}, this installation's {name} is version {mine}"
        if not allow:
            raise MergeError(
                f"{said} (its prompt, scorer or metrics changed); merge with the version that ran them, "
                f"or pass {ALLOW} to recompute with this one"
            )
        notes.append(f"{ALLOW}: {said}; its metrics are recomputed with version {mine}")
    from pytest_agenteval.report.runs import before_versions

    for shard, name in unversioned:  # a shard from before versions: unchecked, and said
        version = installed.get(name) or (seen[name][0] if name in seen else None)
        if version is not None:
            notes.append(before_versions(shard.label, name, version, "merged"))
    return notes


def _check_same(first: ShardFile, other: ShardFile) -> None:
    a, b = first.shard, other.shard
    if a["count"] != b["count"]:
        raise MergeError(
            f"{first.label} and {other.label} come from different splits (into {a['count']} and "
            f"{b['count']} shards); merge the shards of one split"
        )
    if a["config_hash"] != b["config_hash"]:
        raise MergeError(
            f"{first.label} and {other.label} have different configurations ({_config_diff(first, other)}); "
            "merge the shards of one evaluation"
        )
    if a["model_hash"] != b["model_hash"]:
        raise MergeError(
            f"{first.label} and {other.label} evaluated different models ({_model_diff(first, other)}); "
            "merge the shards of one model"
        )
    theirs = {s["suite"]: s["shard"]["data_hash"] for s in other.summaries}
    for summary in first.summaries:
        if summary["suite"] in theirs and theirs[summary["suite"]] != summary["shard"]["data_hash"]:
            raise MergeError(
                f"{first.label} and {other.label} read different {summary['suite']} data; merge the shards "
                "of one dataset"
            )
    if a["selection_hash"] != b["selection_hash"]:
        raise MergeError(
            f"{first.label} and {other.label} split different selections ({a['selected']} and "
            f"{b['selected']} items: -k, -m, --limit or the data differ); merge the shards of one selection"
        )


def _config_diff(first: ShardFile, other: ShardFile) -> str:
    local = {o.dest for o in OPTIONS if o.local}
    flags = {o.dest: o.flag for o in OPTIONS}
    a, b = first.config, other.config
    differing = [k for k in sorted(set(a) | set(b)) if k not in local and a.get(k) != b.get(k)]
    shown = ", ".join(f"{flags.get(k, k)} {a.get(k)!r} vs {b.get(k)!r}" for k in differing[:3])
    return shown or "options set explicitly differ"


def _model_diff(first: ShardFile, other: ShardFile) -> str:
    """`step-800 (vllm, launched) vs step-900 (...)`, or where the names agree, the first
    field of the identity that differs (`sha256 '3f2a...' vs '9c1b...'`)."""
    a, b = first.summaries[0].get("model") or {}, other.summaries[0].get("model") or {}
    if a.get("display") != b.get("display"):
        return f"{a.get('display')} vs {b.get('display')}"
    key = next(
        (k for k in sorted(set(a) | set(b)) if k not in VOLATILE_MODEL_FIELDS and a.get(k) != b.get(k)), ""
    )
    return f"{a.get('display')}: {key} {str(a.get(key))[:16]!r} vs {str(b.get(key))[:16]!r}"


def _check_indices(shards: Sequence[ShardFile]) -> dict[int, ShardFile]:
    by_index: dict[int, ShardFile] = {}
    for shard in shards:
        index = shard.shard["index"]
        if index in by_index:
            raise MergeError(
                f"shard {index}/{shard.shard['count']} is given twice: {by_index[index].path} and "
                f"{shard.path}; pass each shard's results file once"
            )
        by_index[index] = shard
    count = shards[0].shard["count"]
    absent = [i for i in range(count) if i not in by_index]
    if absent:
        names = ", ".join(str(i) for i in absent)
        raise MergeError(
            f"shard{'s' if len(absent) > 1 else ''} {names} of {count} missing: run "
            f"--agenteval-shard {absent[0]}/{count} and pass its results file too"
        )
    return by_index


def _check_items(by_index: Mapping[int, ShardFile], shard: Mapping[str, Any]) -> None:
    owner: dict[str, int] = {}
    for index, file in sorted(by_index.items()):
        for nodeid in file.shard["items"]:
            if nodeid in owner:
                raise MergeError(
                    f"{by_index[owner[nodeid]].label} and {file.label} both hold {nodeid}: conflicting "
                    "shards (not one split); rerun them from one command"
                )
            owner[nodeid] = index
    if shard["selection_hash"] is not None and selection_hash(owner) != shard["selection_hash"]:
        raise MergeError(
            f"the shards hold {len(owner)} items, not the {shard['selected']} of the selection they were "
            "split from: conflicting shards; rerun them from one command"
        )
