"""A suite's summary line, computed from its records: one function for the controller of
a pytest run and for `pytest-agenteval merge`, so a merged summary equals the unsharded
run's field by field (`RUN_LOCAL_FIELDS` aside); and the `shard` object of a sharded run's
summaries, whose hashes the merge compares."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_agenteval.api.records import ProblemRecord
from pytest_agenteval.config.presets import preset_record
from pytest_agenteval.config.settings import Settings
from pytest_agenteval.config.table import OPTIONS
from pytest_agenteval.output.length import length_block
from pytest_agenteval.output.results import incomplete_reason, not_scored_reason, request_totals, token_totals
from pytest_agenteval.tasks.registry import suite_by_name

# Fields of a summary that describe how this process ran, not what the model did: a merged
# summary has the merge's own (and `merged`, its shards' provenance), a sharded run's its
# `shard`; every other field of a merged summary equals the unsharded run's.
# `concurrency`, `budget`: each run's own --concurrency auto history and budget (a merge keeps
# them in the shards' files)
RUN_LOCAL_FIELDS = (
    "started_at",
    "finished_at",
    "duration_s",
    "harness",
    "workers",
    "concurrency",
    "budget",
    "shard",
    "merged",
)
# Fields of the model's description that differ between the machines serving one model
# (addresses, log files, threads): left out of `model_hash`.
VOLATILE_MODEL_FIELDS = ("path", "endpoints", "n_threads", "display")
VOLATILE_SERVED_FIELDS = ("replicas", "logs", "server_notes", "warnings", "adapter_probe")


@dataclass(frozen=True)
class RunFacts:
    """What a summary says beyond its records: the model, the selection, the counters of
    the processes, the environment and the timing."""

    base_model: str
    model: Mapping[str, Any]
    keyword: str | None
    markexpr: str | None
    backend: Mapping[str, int]
    storage: Sequence[str]
    workers: int
    versions: Mapping[str, str]
    harness: Mapping[str, float]
    started_at: str
    finished_at: str
    duration_s: float
    concurrency: Mapping[str, Any] | None = None  # --concurrency auto's history, else None
    # the `cost` (and `budget`) fields of a suite's records (output/cost.py), else none
    cost: Callable[[Sequence[ProblemRecord]], Mapping[str, Any]] | None = None


@dataclass(frozen=True)
class ShardFacts:
    index: int
    count: int
    selected: int | None
    selection_hash: str | None
    items: Sequence[str]


def suite_summary(
    name: str,
    records: Sequence[ProblemRecord],
    whole: Callable[[Sequence[ProblemRecord]], Sequence[ProblemRecord]],
    missing: Sequence[str],
    interrupted: bool,
    settings: Settings,
    run: RunFacts,
    shard: ShardFacts | None = None,
) -> dict[str, Any]:
    """The summary line of suite `name`. `records` come without their texts; `whole` gives
    the same records with them, read back one at a time (exports, suites that read texts)."""
    suite = suite_by_name(name)
    scored = [r for r in records if r.complete]
    errored = [r for r in records if not r.complete]
    files = {r.nodeid.split("::")[0] for r in records}
    own_missing = [n for n in missing if n.split("::")[0] in files]
    described = suite.describe(settings)
    summarized = suite.summarize(whole(scored) if suite.summarize_reads_texts else scored, settings)
    summary = {
        "type": "summary",
        "suite": name,
        "suite_version": suite.version,  # its prompt, scorer and metrics (api.Suite.version)
        "dataset": described.get("dataset", name),
        "mode": described.get("mode"),
        "base_model": run.base_model,
        "model_path": settings.model_path,
        **suite.sampling(settings),
        "val_n": records[0].val_n if records else settings.val_n,
        **summarized,
        **suite.after_run(whole(records), settings),  # exports need the texts
        # why the metrics are null (nothing scored), else null; a suite may say it first
        "not_scored": not_scored_reason(len(scored), len(errored), len(own_missing))
        or summarized.get("not_scored"),
        "complete": not errored and not own_missing and not interrupted,
        "incomplete": incomplete_reason(
            len(records) + len(own_missing), len(errored), len(own_missing), interrupted
        ),
        "errors": {
            "items": len(errored),
            "problem_ids": [r.problem_id for r in errored],
            "messages": {str(r.problem_id): r.error for r in errored},
        },
        "missing": own_missing,
        "tokens": token_totals(records),
        "length": _length(records, suite.sampling(settings), described.get("mode"), settings),
        "requests": request_totals(records),
        **(run.cost(records) if run.cost is not None else {}),
        "backend": dict(sorted(run.backend.items())),
        "concurrency": dict(run.concurrency) if run.concurrency else None,
        "storage": list(run.storage),  # what went wrong on disk so far
        # stalls caught, by cause: idle (a stream silent for --idle-timeout), deadline
        # (non-streamed, from max_tokens and throughput), request_timeout
        "stalls": {
            k.removeprefix("stalls_"): v for k, v in sorted(run.backend.items()) if k.startswith("stalls_")
        },
        **described,
        "model": dict(run.model),
        "selection": {
            "limit": settings.limit,
            "keyword": run.keyword,
            "markexpr": run.markexpr,
            "items": len(records) + len(own_missing),
        },
        # --agenteval-preset: what it set, what the user overrode, what the suite kept its own
        "preset": preset_record(
            settings, {**suite.sampling(settings), "val_n": records[0].val_n if records else settings.val_n}
        ),
        "config": settings.as_dict(),
        "workers": run.workers,
        "versions": dict(run.versions),
        "harness": dict(run.harness),
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "duration_s": run.duration_s,
    }
    if shard is not None:
        summary["shard"] = shard_object(shard, settings, summary["model"], described)
    return summary


def _length(
    records: Sequence[ProblemRecord], sampling: Mapping[str, Any], mode: Any, settings: Settings
) -> dict[str, Any]:
    """The `length` block (output/length.py); AIME retool's budget is its per-turn cap."""
    flag = "--max-assistant-tokens" if mode == "retool" else "--max-tokens"
    return length_block(records, sampling.get("max_tokens"), settings.length_warn_share, flag)


def shard_object(
    shard: ShardFacts, settings: Settings, model: Mapping[str, Any], described: Mapping[str, Any]
) -> dict[str, Any]:
    explicit = sorted(settings.explicit - _local_options())  # suites default what the user did not set
    return {
        "index": shard.index,
        "count": shard.count,
        "config_hash": config_hash(settings.as_dict(), explicit),
        "model_hash": model_hash(model),
        "data_hash": _digest(described),
        "selection_hash": shard.selection_hash,
        "selected": shard.selected,
        "items": list(shard.items),
        "explicit": explicit,
    }


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _local_options() -> frozenset[str]:
    return frozenset(option.dest for option in OPTIONS if option.local)


def config_hash(config: Mapping[str, Any], explicit: Sequence[str] = ()) -> str:
    """Of the settings that change what a run produces, and which of them the user set:
    run-local options (`Option.local`: paths, endpoints, concurrency, timeouts, gates, the
    shard itself) left out."""
    local = _local_options()
    kept = {k: v for k, v in config.items() if k not in local}
    return _digest({"config": kept, "explicit": sorted(set(explicit) - local)})


def model_hash(model: Mapping[str, Any]) -> str:
    """Of the model's identity: its description without what differs between machines."""
    identity = {k: v for k, v in model.items() if k not in VOLATILE_MODEL_FIELDS}
    if isinstance(identity.get("served"), Mapping):
        identity["served"] = {k: v for k, v in identity["served"].items() if k not in VOLATILE_SERVED_FIELDS}
    if isinstance(identity.get("reported"), list):  # /v1/models entries: `created` is the server's start
        identity["reported"] = [
            {k: v for k, v in entry.items() if k != "created"} if isinstance(entry, Mapping) else entry
            for entry in identity["reported"]
        ]
    return _digest(identity)


def selection_hash(nodeids: Iterable[str]) -> str:
    """Of the whole selection's node ids, in any order (the merge hashes the union of its
    shards' items)."""
    return _digest(sorted(nodeids))


def harness_usage() -> dict[str, float]:
    """This process's own peak memory and CPU time so far."""
    import resource  # POSIX only: imported here, so the plugin itself imports anywhere

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "controller_peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "controller_cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
    }


def iso_time(timestamp: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(timestamp))


def pack_record(data: Mapping[str, Any]) -> bytes:
    """A record kept for the summaries, small: pickled (one copy of each key) and
    compressed (the N generations of a problem look alike)."""
    import pickle  # here, not at import: off the path to the first request (2 ms)
    import zlib

    try:
        blob = pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # a value pickle cannot take (-n 0 keeps the worker's objects)
        blob = pickle.dumps(json.loads(json.dumps(data, default=str)), protocol=pickle.HIGHEST_PROTOCOL)
    return zlib.compress(blob, 1)


def unpack_record(packed: bytes) -> dict[str, Any]:
    import pickle
    import zlib

    return pickle.loads(zlib.decompress(packed))
