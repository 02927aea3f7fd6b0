"""`pytest-agenteval merge SHARD.jsonl... -o MERGED.jsonl`: the results files of the shards
of one evaluation (`--agenteval-shard I/N`) joined into the file the unsharded run would
have written, its metrics recomputed per suite, gated and compared as a run is.

Streamed: the shards' problem lines are read once, each kept packed without its texts
(what the metrics need); the texts are read back from the shard files by offset, one
record at a time, to write the merged file. Each refusal is one line, exit status 4."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import pickle
import sys
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from pytest_agenteval.api.records import GenerationRecord, ProblemRecord, problem_from_dict, without_texts
from pytest_agenteval.config.settings import Settings, one_model_path
from pytest_agenteval.config.table import OPTIONS
from pytest_agenteval.output import ci, merge_checks, terminal
from pytest_agenteval.output.compare import BaselineError, Comparison, check_baseline, compare, load_baseline
from pytest_agenteval.output.cost import merged_cost
from pytest_agenteval.output.gate import GateError, GateResult, evaluate_gate, parse_gate
from pytest_agenteval.output.merge_checks import MergeError, ShardFile, check_shards
from pytest_agenteval.output.results import ResultsFile, StoredRecords, check_writable
from pytest_agenteval.output.summary import RunFacts, harness_usage, suite_summary
from pytest_agenteval.output.trackers import log_merged, log_target, read_markers
from pytest_agenteval.tasks.registry import SuiteImportError, suite_by_name

USAGE_ERROR = 4


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # a usage error is exit 4 here, as in a run
        raise MergeError(f"{message} (see pytest-agenteval merge --help)")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pytest-agenteval merge",
        description="Join the results files of the shards of one evaluation (--agenteval-shard I/N): "
        "every metric recomputed, gates and the baseline comparison applied as a run applies them.",
    )
    parser.add_argument("shards", nargs="+", type=Path, help="the shards' results files (--agenteval-out)")
    parser.add_argument("-o", "--out", type=Path, required=True, help="the merged results file to write")
    parser.add_argument("--agenteval-gate", dest="gates", action="append", default=[], help="as in a run")
    parser.add_argument("--agenteval-compare", dest="compare", type=Path, help="baseline results JSONL")
    parser.add_argument("--agenteval-compare-tolerance", dest="tolerance", type=float, help="as in a run")
    parser.add_argument("--junitxml", type=Path, help="write a JUnit XML file, as pytest --junitxml does")
    parser.add_argument("--allow-version-change", action="store_true", help="across suite versions")
    parser.add_argument("--agenteval-log", action="append", default=[], type=log_target, help="as in a run")
    parser.add_argument("--agenteval-log-always", dest="log_always", action="store_true", help="as in a run")
    return parser


class ShardLines:
    """The shards' problem lines, read back by (file, offset, length)."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = list(paths)
        self._handles: dict[int, BinaryIO] = {}

    def read(self, key: tuple[int, int, int]) -> dict[str, Any]:
        number, offset, length = key
        handle = self._handles.get(number)
        if handle is None:
            handle = self._handles[number] = self.paths[number].open("rb")
        handle.seek(offset)
        return json.loads(handle.read(length))

    def close(self) -> None:
        for handle in self._handles.values():
            handle.close()


@dataclass
class Merged:
    """What the shards hold: per suite, the packed records."""

    shards: list[ShardFile]
    packed: dict[str, list[PackedProblem]] = field(default_factory=dict)


def read_shards(paths: Sequence[Path]) -> Merged:
    """One pass over each file: the summaries whole, each problem line packed
    (`PackedProblem`)."""
    merged = Merged([])
    for number, path in enumerate(paths):
        shard = ShardFile(path)
        try:
            handle = path.open("rb")
        except OSError as exc:
            raise MergeError(
                f"{path}: cannot read it ({exc.strerror or exc}); pass the shards' results files"
            ) from None
        with handle:
            offset = 0
            for line_number, line in enumerate(handle, 1):
                data = _parse(line, path, line_number)
                if data is not None and data.get("type") == "summary":
                    shard.summaries.append(data)
                elif data is not None and data.get("type") == "problem":
                    shard.records.append(str(data.get("nodeid", "")))  # checked against its items
                    key = (number, offset, len(line))
                    suite = suite_by_name(data["suite"], Path(str(data.get("nodeid", "")).split("::")[0]))
                    record = problem_from_dict(without_texts(data), suite.score_fields)
                    merged.packed.setdefault(data["suite"], []).append(PackedProblem(record, key))
                offset += len(line)
        merged.shards.append(shard)
    return merged


def _parse(line: bytes, path: Path, number: int) -> dict[str, Any] | None:
    if not line.strip():
        return None
    try:
        data = json.loads(line)
    except json.JSONDecodeError:
        raise MergeError(f"{path}:{number}: not valid JSON; is it a results file?") from None
    return data if isinstance(data, dict) else None


def settings_from(
    config: Mapping[str, Any], explicit: Sequence[str], overrides: Mapping[str, Any]
) -> Settings:
    """The run's `Settings` rebuilt from a summary's `config` (`Settings.as_dict()`)."""
    values: dict[str, Any] = {}
    for option in OPTIONS:
        value = config.get(option.dest, option.default)
        values[option.dest] = tuple(value) if option.multiple and value is not None else value
    values.update(overrides)
    return Settings(**values, model_path=one_model_path(values["model_paths"]), explicit=frozenset(explicit))


def main(argv: list[str]) -> int:
    try:
        return run_merge(_parser().parse_args(argv))
    except (MergeError, GateError, BaselineError, SuiteImportError) as exc:
        print(f"pytest-agenteval merge: {exc}", file=sys.stderr)
        return USAGE_ERROR


def _refuse_writing_over_inputs(args: argparse.Namespace) -> None:
    """The merged file is written in place of -o: never over a shard or the baseline."""
    if not args.out.exists():
        return
    for path in args.shards:
        if path.exists() and path.samefile(args.out):
            raise MergeError(
                f"-o {args.out} is one of the shards' results files; write the merge to a new file"
            )
    if args.compare is not None and args.compare.exists() and args.compare.samefile(args.out):
        raise MergeError(f"-o {args.out} is the --agenteval-compare baseline; write the merge to a new file")


def _check_outputs_writable(args: argparse.Namespace) -> None:
    """-o and --junitxml must take a file now, before the shards are read."""
    for flag, path in (("-o", args.out), ("--junitxml", args.junitxml)):
        if path is None:
            continue
        try:
            check_writable(path)
        except OSError as exc:
            raise MergeError(
                f"{flag} {path}: not writable ({exc.strerror or exc}); choose a writable path"
            ) from None


def run_merge(args: argparse.Namespace) -> int:
    _refuse_writing_over_inputs(args)
    _check_outputs_writable(args)
    gates = [parse_gate(expression) for expression in args.gates]
    for gate in gates:
        if gate.labels:  # a sweep's shards are merged one model at a time
            raise GateError(
                f"--agenteval-gate {gate.expression!r}: names a model; a merge is of one model's "
                f"shards: gate it as {gate.suite}.{gate.metric} ..., and compare the merged models "
                "with pytest-agenteval report"
            )
    baseline = load_baseline(args.compare) if args.compare else None
    args.previous = read_markers([args.out])  # --agenteval-log: what the last merge logged
    merged = read_shards(args.shards)
    first = check_shards(merged.shards)
    merge_checks.say(merge_checks.check_versions(merged.shards, args.allow_version_change))
    for checked in merged.shards:  # the node ids were for the checks: two per problem, let go
        checked.records.clear()
        for summary in checked.summaries:
            summary["shard"]["items"] = []
    shard = first.shard
    tolerance = args.tolerance if args.tolerance is not None else first.config.get("compare_tolerance", 0.0)
    settings = settings_from(
        first.config,
        shard.get("explicit") or (),
        {
            "shard": None,
            "shard_count": 0,
            "out": str(args.out),
            "gates": tuple(args.gates),
            "compare": str(args.compare) if args.compare else None,
            "compare_tolerance": tolerance,
        },
    )
    lines = ShardLines(args.shards)
    try:
        return _finish(args, merged, lines, settings, gates, baseline)
    finally:
        lines.close()


def _finish(
    args: argparse.Namespace,
    merged: Merged,
    lines: ShardLines,
    settings: Settings,
    gates: list[Any],
    baseline: Mapping[str, Mapping[str, float]] | None,
) -> int:
    by_suite, whole = _records(merged, lines)
    if baseline is not None:
        samples, versions = (
            {n: r[0].val_n for n, r in by_suite.items() if r},
            merge_checks.versions_of(by_suite, args),
        )
        merge_checks.say(check_baseline(args.compare, baseline, samples, **versions))
    run, missing, interrupted = _run_facts(merged.shards)
    shard_summaries = [s for shard in merged.shards for s in shard.summaries]
    run = dataclasses.replace(
        run,
        cost=functools.partial(
            merged_cost, settings=settings, shard_summaries=shard_summaries, duration_s=run.duration_s
        ),
    )
    summaries = [
        suite_summary(name, records, whole, missing, interrupted, settings, run)
        for name, records in sorted(by_suite.items())
    ]
    gate_results = [evaluate_gate(g, {s["suite"]: s for s in summaries}) for g in gates]
    comparisons = []
    if baseline is not None:
        comparisons = [
            compare(name, records, baseline, settings.compare_tolerance, settings.seed)
            for name, records in sorted(by_suite.items())
        ]
    provenance = _provenance(merged.shards)
    for summary in summaries:
        summary["gates"] = [r.as_dict() for r in gate_results if r.gate.suite == summary["suite"]]
        summary["compare"] = next((c.as_dict() for c in comparisons if c.suite == summary["suite"]), None)
        summary["merged"] = provenance
        budget = merged_budget([s for s in shard_summaries if s.get("suite") == summary["suite"]])
        if budget is not None:
            summary["budget"] = budget
    results = ResultsFile()
    written = results.finalize(args.out, whole([r for n in sorted(by_suite) for r in by_suite[n]]), summaries)
    for line in terminal.run_lines(summaries, gate_results, comparisons):
        print(line)
    for note in results.notes:
        print(f"storage: {note}")
    if written:
        print(f"results: {written}")
    _ci_outputs(args, by_suite, missing, summaries, gate_results, comparisons)
    for line in log_merged(args.agenteval_log, summaries, written, args.log_always, args.previous):
        print(f"agenteval: {line}")
    unsolved = any(
        r.complete and not suite_by_name(name).item_passed(r) for name, rs in by_suite.items() for r in rs
    )
    return merged_exit_status(
        summaries, gate_results, comparisons, bool(gates), unsolved, written == args.out
    )


def merged_budget(shard_summaries: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """A merge's `budget`: the shards' spending summed (each shard's summary has its own
    share, also of a --budget-ledger they shared), the items each stopped, and the ledger
    the shards drew on (None: each had its own budget, --budget-per-shard)."""
    blocks = [s["budget"] for s in shard_summaries if isinstance(s.get("budget"), Mapping)]
    if not blocks:
        return None
    reservations: dict[str, int] = {}
    for block in blocks:
        for method, count in (block.get("prompt_reservation") or {}).items():
            reservations[method] = reservations.get(method, 0) + int(count)
    ledgers = sorted({str(b["ledger"]["path"]) for b in blocks if isinstance(b.get("ledger"), Mapping)})
    return {
        "max_cost_usd": blocks[0].get("max_cost_usd"),
        "max_total_tokens": blocks[0].get("max_total_tokens"),
        "spent_usd": round(sum(float(b.get("spent_usd") or 0.0) for b in blocks), 9),
        "spent_tokens": sum(int(b.get("spent_tokens") or 0) for b in blocks),
        "requests": sum(int(b.get("requests") or 0) for b in blocks),
        "refused_requests": sum(int(b.get("refused_requests") or 0) for b in blocks),
        "stopped": any(b.get("stopped") for b in blocks),
        "stopped_problem_ids": [p for b in blocks for p in b.get("stopped_problem_ids") or ()],
        "prompt_reservation": reservations,
        "shards": len(blocks),
        "shared_ledger": ledgers[0] if len(ledgers) == 1 else (ledgers or None),
    }


def _records(
    merged: Merged, lines: ShardLines
) -> tuple[dict[str, list[ProblemRecord]], Callable[[Sequence[ProblemRecord]], StoredRecords]]:
    """Each suite's records, packed (`PackedProblem`), in dataset order, and how to read
    them whole."""
    by_suite: dict[str, list[ProblemRecord]] = {}
    for name, records in sorted(merged.packed.items()):
        by_suite[name] = sorted(records, key=lambda r: r.index)
        records.clear()

    def whole(records: Sequence[ProblemRecord]) -> StoredRecords:
        def decode(data: Mapping[str, Any]) -> ProblemRecord:
            return problem_from_dict(data, suite_by_name(data["suite"]).score_fields)

        keys = [r.key for r in records]  # type: ignore[attr-defined]
        return StoredRecords(lines, keys, decode)  # type: ignore[arg-type]

    return by_suite, whole


class PackedProblem(ProblemRecord):
    """A problem record kept packed: the record without texts, pickled and compressed
    (~60 bytes a generation), with what the summary filters on (ids, counts,
    completeness) at hand; its generations are unpacked each time they are read and
    dropped after. The unpacked records of a run would take ~1.2 KB a generation."""

    def __init__(self, record: ProblemRecord, key: tuple[int, int, int]) -> None:
        values = {
            "suite": record.suite,
            "problem_id": record.problem_id,
            "index": record.index,
            "val_n": record.val_n,
            "error": record.error,
            "nodeid": record.nodeid,
            "key": key,  # where its whole line is, in the shard files
            "_packed": zlib.compress(pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL), 1),
            "_counts": (len(record.generations), record.num_correct),
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def _unpacked(self) -> ProblemRecord:
        return _unpacked(self._packed)  # type: ignore[attr-defined]

    @property
    def generations(self) -> Sequence[GenerationRecord]:  # type: ignore[override]
        return _Generations(self)

    @property
    def num_correct(self) -> int:
        return self._counts[1]  # type: ignore[attr-defined, no-any-return]

    @property
    def complete(self) -> bool:
        return self.error is None and self._counts[0] == self.val_n  # type: ignore[attr-defined]

    problem = property(lambda self: self._unpacked().problem)  # type: ignore[assignment]
    ground_truth = property(lambda self: self._unpacked().ground_truth)
    markers = property(lambda self: self._unpacked().markers)  # type: ignore[assignment]
    prompt_hash = property(lambda self: self._unpacked().prompt_hash)  # type: ignore[assignment]
    extra = property(lambda self: self._unpacked().extra)  # type: ignore[assignment]


class _Generations(Sequence[GenerationRecord]):
    """A packed record's generations: their count at hand, the records unpacked when read."""

    def __init__(self, record: PackedProblem) -> None:
        self._record = record

    def __len__(self) -> int:
        return self._record._counts[0]  # type: ignore[attr-defined, no-any-return]

    def __getitem__(self, index: Any) -> Any:
        return self._record._unpacked().generations[index]

    def __iter__(self) -> Iterator[GenerationRecord]:
        return iter(self._record._unpacked().generations)


@functools.lru_cache(maxsize=4)  # a metric reading one record's generations twice unpacks them once
def _unpacked(packed: bytes) -> ProblemRecord:
    # the record's own pickle: 3x faster to read back than its line through problem_from_dict
    return pickle.loads(zlib.decompress(packed))  # type: ignore[no-any-return]


def _ci_outputs(
    args: argparse.Namespace,
    by_suite: Mapping[str, Sequence[ProblemRecord]],
    missing: Sequence[str],
    summaries: Sequence[Mapping[str, Any]],
    gate_results: Sequence[GateResult],
    comparisons: Sequence[Comparison],
) -> None:
    """--junitxml and $GITHUB_STEP_SUMMARY, as a run writes them."""
    if args.junitxml:
        decided = bool(gate_results or comparisons)
        items = (  # one record's line at a time: each becomes its small testcase
            (record.to_dict(), _outcome(record, suite_by_name(name), decided))
            for name, records in sorted(by_suite.items())
            for record in records
        )
        try:
            ci.write_junit(
                args.junitxml,
                items,  # type: ignore[arg-type]
                missing,
                ci.suite_properties(summaries, gate_results, comparisons),
                ci.verdict_cases(gate_results, comparisons),
            )
        except OSError as exc:  # it was writable at start: the merged file is written all the same
            raise MergeError(
                f"--junitxml {args.junitxml}: cannot write it ({exc.strerror or exc}); the merged "
                "results file is written (see results: above): rerun the merge with a writable --junitxml"
            ) from None
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if target:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(ci.step_summary(summaries, gate_results, comparisons))


def _outcome(record: ProblemRecord, suite: Any, decided_by_verdicts: bool) -> str:
    """The item's JUnit outcome as pytest reports it: error, failure, xfail or passed."""
    if not record.complete:
        return "error"
    if suite.item_passed(record):
        return "passed"
    return "xfail" if decided_by_verdicts else "failure"


def _run_facts(shards: Sequence[ShardFile]) -> tuple[RunFacts, list[str], bool]:
    """The merged run's facts: the first shard's model and environment, every shard's
    counters summed, missing items joined; the timing spans the shards."""
    firsts = [s.summaries[0] for s in shards]
    backend: dict[str, int] = {}
    for summary in firsts:
        for key, value in (summary.get("backend") or {}).items():
            backend[key] = backend.get(key, 0) + value
    storage: list[str] = []
    missing: list[str] = []
    for shard in shards:
        for summary in shard.summaries:
            storage.extend(n for n in summary.get("storage") or () if n not in storage)
            missing.extend(n for n in summary.get("missing") or () if n not in missing)
    interrupted = any(
        str(s.get("incomplete") or "").endswith("interrupted") for sh in shards for s in sh.summaries
    )
    head = firsts[0]
    run = RunFacts(
        base_model=head.get("base_model"),
        model=head.get("model") or {},
        keyword=(head.get("selection") or {}).get("keyword"),
        markexpr=(head.get("selection") or {}).get("markexpr"),
        backend=backend,
        storage=storage,
        workers=sum(int(s.get("workers") or 0) for s in firsts),
        versions=head.get("versions") or {},
        harness=harness_usage(),
        started_at=min(str(s.get("started_at")) for s in firsts),
        finished_at=max(str(s.get("finished_at")) for s in firsts),
        duration_s=round(sum(float(s.get("duration_s") or 0) for s in firsts), 3),
    )
    return run, missing, interrupted


def _provenance(shards: Sequence[ShardFile]) -> dict[str, Any]:
    shard = shards[0].shard
    return {
        "shards": shard["count"],
        "files": [str(s.path) for s in sorted(shards, key=lambda s: s.shard["index"])],
        **{k: shard.get(k) for k in ("config_hash", "model_hash", "selection_hash", "selected")},
        "merged_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def merged_exit_status(
    summaries: Sequence[Mapping[str, Any]],
    gate_results: Sequence[GateResult],
    comparisons: Sequence[Comparison],
    gated: bool,
    unsolved: bool,
    written: bool,
) -> int:
    """docs/ci.md's table, for what a merge can see: incomplete shards (errored or missing
    items) and unsolved problems; a gate forgives the unsolved ones only."""
    complete = all(s.get("complete") for s in summaries)
    if not written:
        return 1  # the asked-for file is missing
    if not gated and not comparisons:
        return 0 if complete and not unsolved else 1
    if not gated and not any(c.decided for c in comparisons):
        return 0 if complete and not unsolved else 1  # an undecided comparison is no verdict
    verdicts = [r.passed for r in gate_results] + [c.passed for c in comparisons if c.decided]
    return 0 if complete and verdicts and all(verdicts) else 1
