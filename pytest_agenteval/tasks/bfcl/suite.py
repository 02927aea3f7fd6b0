"""BFCL as a test suite: one item per official entry, prompting or native calls."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_agenteval.api.metrics import accuracy_intervals, not_applicable, shown
from pytest_agenteval.api.records import Problem, ProblemRecord, Rollout, Score, content_hash
from pytest_agenteval.api.suite import DataError, RolloutContext, Suite
from pytest_agenteval.config.options import Settings
from pytest_agenteval.solvers.single_turn import single_turn_rollout
from pytest_agenteval.tasks.bfcl._agentic import forget_memory
from pytest_agenteval.tasks.bfcl._agentic_data import AgenticEntry
from pytest_agenteval.tasks.bfcl._data import (
    ALL_CATEGORIES,
    CATEGORIES,
    BfclDataError,
    BfclEntry,
    category_markers,
    find_data_dir,
    load_bfcl,
)
from pytest_agenteval.tasks.bfcl._executable import load_executable, skip_reason
from pytest_agenteval.tasks.bfcl._executable import play as play_executable
from pytest_agenteval.tasks.bfcl._executable import score as score_executable
from pytest_agenteval.tasks.bfcl._format_sensitivity import (
    FormatEntry,
    configurations,
    format_messages,
    load_format_sensitivity,
    score_format,
    spread,
)
from pytest_agenteval.tasks.bfcl._metrics import BfclItemResult, summarize_bfcl
from pytest_agenteval.tasks.bfcl._mt_data import MultiTurnEntry
from pytest_agenteval.tasks.bfcl._mt_rollout import stored_result
from pytest_agenteval.tasks.bfcl._progressive import next_stage, progressive_stages
from pytest_agenteval.tasks.bfcl._prompt import native_messages, native_tools, prompt_messages
from pytest_agenteval.tasks.bfcl._score import BfclScore, score_text, score_tool_calls
from pytest_agenteval.tasks.bfcl.export import evaluate_command, export_model_name, export_official_results
from pytest_agenteval.tasks.markers import (
    BFCL_ALL_CATEGORIES,
    BFCL_MEMORY_CATEGORIES,
    BFCL_WEB_SEARCH_CATEGORIES,
)

LEADERBOARD_TEMPERATURE = 0.001  # bfcl-eval's default when the user sets none
DEFAULT_MAX_TOKENS = 1024
SCORE_FIELDS = (
    "valid",
    "lenient_valid",
    "error_type",
    "decode_error",
    "predicted_call",
    "expected_call",
    "params_total",
    "params_correct",
    "decoded",
    "error_message",
    "failed_turn",
    "turn_checks",
    "final_answer",
)
EXECUTABLE = (MultiTurnEntry, AgenticEntry)  # played step by step in bfcl-eval's environments


# Each data folder's entries, by its files' names, sizes and modification times. Parsing
# every BFCL file (10,306 entries; the multi-turn docs copied for each entry) takes about 2 s
# of CPU; a process that runs several sessions (pytest.main() in a loop, pytester's in-process
# runs: about 80 sessions in this project's tests) parses them once. Sessions share the entries
# read-only: every use copies what it changes (`_prompt.py`, `_mt_rollout.py`, `_mt_env.py`
# deep-copy the docs, turns and configurations), and tests/bfcl/test_entries_memo.py checks that
# scored sessions leave them equal to a fresh parse.
_LOADED: dict[tuple[str, tuple[tuple[str, int, int, int, int], ...]], list[Any]] = {}


def all_entries(data_dir: str | Path | None) -> list[Any]:
    """Every BFCL entry of the data folder (single-turn, executable, format sensitivity), in
    the suite's order: parsed once a process while the folder's files are unchanged."""
    root = find_data_dir(data_dir)
    key = (str(root.resolve()), _stamp(root))
    if key not in _LOADED:
        entries: list[Any] = [*load_bfcl(CATEGORIES, root)]
        entries.extend(load_executable(root))
        entries.extend(load_format_sensitivity(root))
        for stale in [k for k in _LOADED if k[0] == key[0]]:  # a changed file replaces its folder's
            del _LOADED[stale]
        _LOADED[key] = entries
    return list(_LOADED[key])


def data_files() -> list[tuple[str, int, int, dict[str, int]]] | None:
    """Each data file of the installed bfcl-eval: (name, lines, entries, items per category),
    counted as `all_entries` expands them (memory's lines once per memory backend, web
    search's once per variant, format sensitivity's entries once per format), without
    parsing the entries; None where bfcl-eval is not installed."""
    try:
        root = find_data_dir(None)
    except BfclDataError:
        return None
    found = []
    for path in sorted(root.glob("BFCL_v4_*.json")):
        with path.open("rb") as handle:
            lines = sum(1 for line in handle if line.strip())
        stem = path.stem.removeprefix("BFCL_v4_")
        entries = lines
        if stem == "format_sensitivity":
            entries = sum(len(ids) for ids in json.loads(path.read_text()).values())
            counts = {stem: entries * len(configurations())}
        elif stem == "memory":
            counts = dict.fromkeys(BFCL_MEMORY_CATEGORIES, lines)
        elif stem == "web_search":
            counts = dict.fromkeys(BFCL_WEB_SEARCH_CATEGORIES, lines)
        else:
            counts = {stem: lines}
        found.append((path.name, lines, entries, counts))
    return found


def _stamp(root: Path) -> tuple[tuple[str, int, int, int, int], ...]:
    """Each file's name, size, modification and change times and inode: a file rewritten in
    place with its size and mtime put back (`cp -p`, `rsync -a`) still has a new ctime, which
    no program can set, and a file replaced by another has a new inode."""
    stamps = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            stat = os.stat(path)
            stamps.append(
                (os.path.relpath(path, root), stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)
            )
    return tuple(sorted(stamps))


def parse_weights(text: str | None) -> dict[str, float] | None:
    """`simple_python=2,multiple=1` -> {"simple_python": 2.0, "multiple": 1.0}."""
    if not text:
        return None
    weights = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        if name.strip() not in ALL_CATEGORIES:
            raise ValueError(
                f"--bfcl-weights: unknown category {name.strip()!r}; use the categories "
                f"({', '.join(ALL_CATEGORIES)}), not groups"
            )
        try:
            weights[name.strip()] = float(value)
        except ValueError:
            raise ValueError(f"--bfcl-weights: {part!r} is not CATEGORY=NUMBER") from None
        if weights[name.strip()] < 0:
            raise ValueError(f"--bfcl-weights: {part!r}: weights must be >= 0")
    return weights


class Bfcl(Suite):
    name = "bfcl"
    version = "1"  # the leaderboard's prompts, the official checkers' verdicts, accuracy per group
    title = "BFCL v4: function calling, the official checkers' verdicts"
    size_from = "items the suite collects from the installed bfcl-eval's data files"
    size_unknown = "from bfcl-eval (pip install --no-deps bfcl-eval==2026.3.23)"
    groups = BFCL_ALL_CATEGORIES  # each a marker, with the groups (simple, live, multi_turn...)
    command_args = '-m "non_live or live" --limit-per-category 2'

    def known_size(self) -> int | None:
        """The items the suite collects from the installed bfcl-eval's data files (offline,
        without parsing them: `data_files`), if it is installed."""
        files = data_files()
        return None if files is None else sum(n for _, _, _, counts in files for n in counts.values())

    def size_notes(self) -> list[str]:
        """The data files that give other than one item a line."""
        notes = []
        for name, lines, entries, counts in data_files() or ():
            if list(counts.values()) != [lines]:
                formats = f", {entries} entries x {len(configurations())} formats" if entries != lines else ""
                items = ", ".join(f"{category} {n}" for category, n in counts.items())
                notes.append(f"{name}: {lines} lines{formats} -> {items}")
        return notes

    score_fields = SCORE_FIELDS

    def load(self, settings: Settings) -> list[Problem]:
        forget_memory()  # a session's agentic memory starts empty (load: once a session)
        try:
            entries = all_entries(settings.bfcl_data_dir)
        except BfclDataError as exc:
            raise DataError(str(exc)) from None
        problems = [
            Problem(
                self.name,
                entry.id,
                index,
                _question_text(entry),
                entry.ground_truth,
                ("bfcl", *category_markers(entry.category)),
                entry,
            )
            for index, entry in enumerate(entries)
        ]
        self._ranks, self._category_sizes = _ranks(entries)
        if settings.bfcl_progressive is not None:
            problems = _stage_order(problems, self._ranks)
        return problems

    def samples(self, settings: Settings) -> int:
        return settings.val_n if "val_n" in settings.explicit else 1

    def sampling(self, settings: Settings) -> dict[str, Any]:
        sampling = super().sampling(settings)
        if "temperature" not in settings.explicit:
            sampling["temperature"] = LEADERBOARD_TEMPERATURE
        if "max_tokens" not in settings.explicit:
            sampling["max_tokens"] = DEFAULT_MAX_TOKENS
        return sampling

    async def rollout(self, ctx: RolloutContext) -> Rollout:
        entry: BfclEntry = ctx.problem.payload
        native = ctx.settings.bfcl_style == "native"
        if isinstance(entry, EXECUTABLE):
            return await play_executable(entry, ctx, native)
        if isinstance(entry, FormatEntry):
            completion = await ctx.sampler.complete(format_messages(entry), ctx.params())
            return single_turn_rollout(completion)
        messages = native_messages(entry) if native else prompt_messages(entry)
        tools = native_tools(entry.functions, entry.language) if native else None
        completion = await ctx.sampler.complete(messages, ctx.params(), tools=tools)
        calls = [{"name": c.name, "arguments": c.arguments} for c in completion.tool_calls]
        return single_turn_rollout(completion, {"tool_calls": calls} if native else {})

    def score(self, problem: Problem, rollout: Rollout, settings: Settings) -> Score:
        entry: BfclEntry = problem.payload
        if isinstance(entry, EXECUTABLE):
            return score_executable(entry, rollout, settings.bfcl_style == "native")
        if isinstance(entry, FormatEntry):
            return score_format(entry, rollout.text)
        if settings.bfcl_style == "native":
            calls = rollout.extra.get("tool_calls") or None
            scored = score_tool_calls(entry, calls, rollout.text)
        else:
            scored = score_text(entry, rollout.text)
        return _to_score(entry, scored)

    def prompt_hash(self, problem: Problem, settings: Settings) -> str:
        entry: BfclEntry = problem.payload
        if isinstance(entry, FormatEntry):
            return content_hash([format_messages(entry), settings.bfcl_style])
        if isinstance(entry, EXECUTABLE):  # every turn and the held-out docs, too
            later = [entry.question[1:], sorted(getattr(entry, "missed_functions", {}).items())]
            return content_hash([prompt_messages(entry), later, settings.bfcl_style])
        return content_hash([prompt_messages(entry), settings.bfcl_style])

    def problem_extra(self, problem: Problem) -> dict[str, Any]:
        return {"category": problem.payload.category}

    def category_of(self, problem: Problem) -> str:
        return problem.payload.category

    def admission(self, problem: Problem, settings: Settings, history: Mapping[str, Sequence[bool]]) -> str:
        """Progressive mode: an item of a later stage runs only if its category's accuracy
        at the end of the previous stage reached the threshold."""
        if isinstance(problem.payload, EXECUTABLE):
            reason = skip_reason(problem.payload, settings)
            if reason:
                return reason
        if isinstance(problem.payload, FormatEntry) and settings.bfcl_style == "native":
            return "format sensitivity varies the prompting format: run it with --bfcl-style prompting"
        threshold = settings.bfcl_progressive
        if threshold is None:
            return "run"
        category = problem.payload.category
        sizes = progressive_stages(self._category_sizes[category])
        stage = next(i for i, end in enumerate(sizes) if self._ranks[problem.node_id] < end)
        if stage == 0:
            return "run"
        boundary = sizes[stage - 1]
        seen = list(history.get(category, ()))
        if len(seen) < boundary:
            return "wait"  # the previous stage has not finished here yet
        verdicts = seen[:boundary]
        if next_stage(verdicts, sizes, threshold) is None:
            accuracy = sum(verdicts) / boundary
            return (
                f"progressive: {category} stopped after {boundary} items "
                f"(accuracy {accuracy:.2f} < {threshold:g})"
            )
        return "run"

    def describe(self, settings: Settings) -> dict[str, Any]:
        return {
            "dataset": "bfcl-eval",
            "bfcl_data_dir": settings.bfcl_data_dir,
            "mode": settings.bfcl_style,
            "bfcl_search_backend": settings.bfcl_search_backend,
            "scorer": "bfcl-ast (official semantics)",
        }

    def summarize(self, records: Sequence[ProblemRecord], settings: Settings) -> dict[str, Any]:
        per_problem = [[_item_result(r, g.to_dict()) for g in r.generations] for r in records]
        results = [result for problem in per_problem for result in problem]
        summary = summarize_bfcl(results, parse_weights(settings.bfcl_weights))
        summary.update(
            accuracy_intervals(
                [sum(result.valid for result in problem) for problem in per_problem],
                [len(problem) for problem in per_problem],
                settings.seed,
            )
        )
        formats = [
            (str(r.problem_id).split(":")[1], bool(g.score.correct))
            for r in records
            if r.extra.get("category") == "format_sensitivity"
            for g in r.generations
        ]
        if formats:
            summary["format_sensitivity"] = spread(formats)
        return {"problems": len(records), "generations": len(results), **summary}

    def after_run(self, records: Sequence[ProblemRecord], settings: Settings) -> dict[str, Any]:
        if not settings.bfcl_export_dir:
            return {}
        items = [
            (str(r.problem_id), r.extra["category"], _official_result(g.to_dict(), settings))
            for r in records
            for g in r.generations[:1]
        ]
        if not items:  # every item errored: no file to write, no category to name
            return {"exported": [], "bfcl_evaluate": None}
        model = export_model_name(settings.bfcl_style, settings.bfcl_export_model)
        paths = export_official_results(items, Path(settings.bfcl_export_dir), model)
        present = Counter(item[1] for item in items)
        categories = [c for c in ALL_CATEGORIES if c in present]
        totals = Counter(self.category_of(p) for p in self.load(settings))
        partial = any(present[c] < totals[c] for c in categories)
        command = evaluate_command(settings.bfcl_export_dir, model, categories, partial)
        return {"exported": [str(p) for p in paths], "bfcl_evaluate": command}

    def summary_rows(self, summary: Mapping[str, Any]) -> list[tuple[str, str]]:
        if summary.get("accuracy") is None:  # nothing scored: no number, and why
            rows = [("accuracy", not_applicable(summary))]
        else:
            rows = [("accuracy", f"{summary['accuracy']:.3f} (lenient {shown(summary, 'lenient_accuracy')})")]
        for category, values in (summary.get("per_category") or {}).items():
            rows.append(
                (f"  {category}", f"{values['accuracy']:.3f} ({values['correct']}/{values['total']})")
            )
        groups = summary.get("groups") or {}
        if any(v is not None for v in groups.values()):
            rows.append(("groups", "  ".join(f"{k} {v:.3f}" for k, v in groups.items() if v is not None)))
        rows.append(("overall (leaderboard)", shown(summary, "overall_official")))
        spread = summary.get("format_sensitivity")
        if spread:
            rows.append(
                (
                    "format sensitivity",
                    f"max delta {spread['accuracy_max_delta']:.2f}, std {spread['accuracy_std']:.2f} "
                    f"over {len(spread['configs'])} formats",
                )
            )
        return rows

    def failure_message(self, record: ProblemRecord) -> str:
        errors = [g.score.fields.get("error_type") for g in record.generations]
        return f"{record.num_correct}/{len(record.generations)} valid; error types {errors}"


def _question_text(entry: BfclEntry) -> str:
    turn = entry.question[0] if entry.question else []
    return "\n".join(str(m.get("content", "")) for m in turn if m.get("role") == "user")


def _to_score(entry: BfclEntry, scored: BfclScore) -> Score:
    result = scored.item_result(entry)
    return Score(
        correct=result.valid,
        formatted=scored.decoded is not None,
        answer=_answer_key(scored.decoded),
        fields={
            "valid": result.valid,
            "lenient_valid": result.lenient_valid,
            "error_type": result.error_type,
            "decode_error": scored.decode_error,
            "predicted_call": result.predicted_call,
            "expected_call": result.expected_call,
            "params_total": result.params_total,
            "params_correct": result.params_correct,
            "decoded": scored.decoded,
        },
    )


def _answer_key(decoded: Any) -> str | None:
    """A comparable form of the decoded calls (for maj@N). Decoded values may be anything
    Python literals give (bytes, sets, mixed-key dicts): never let one crash scoring."""
    if decoded is None:
        return None
    try:
        return json.dumps(decoded, sort_keys=True)
    except (TypeError, ValueError):
        return repr(decoded)


def _item_result(record: ProblemRecord, generation: Mapping[str, Any]) -> BfclItemResult:
    return BfclItemResult(
        id=str(record.problem_id),
        category=record.extra["category"],
        valid=bool(generation["valid"]),
        lenient_valid=bool(generation["lenient_valid"]),
        error_type=generation.get("error_type"),
        expected_call=bool(generation["expected_call"]),
        predicted_call=bool(generation["predicted_call"]),
        params_total=int(generation["params_total"]),
        params_correct=int(generation["params_correct"]),
    )


def _official_result(generation: Mapping[str, Any], settings: Settings) -> Any:
    """What bfcl-eval stores per entry: the raw text for prompting models, the list of
    {name: arguments-json} for function-calling ones; per turn and step for multi-turn."""
    if "mt_turns" in generation:
        return stored_result(generation["mt_turns"], generation.get("inference_error"))
    if settings.bfcl_style == "native":
        return [{c["name"]: c["arguments"]} for c in generation.get("tool_calls") or []]
    return generation["text"]


def _ranks(entries: Sequence[BfclEntry]) -> tuple[dict[str, int], dict[str, int]]:
    """Each entry's position within its category, and the category sizes."""
    ranks: dict[str, int] = {}
    sizes: dict[str, int] = {}
    for entry in entries:
        ranks[entry.id] = sizes.get(entry.category, 0)
        sizes[entry.category] = ranks[entry.id] + 1
    return ranks, sizes


def _stage_order(problems: list[Problem], ranks: Mapping[str, int]) -> list[Problem]:
    """Progressive mode runs every category's first 5, then 50, then the rest."""

    def key(problem: Problem) -> tuple[int, int, int]:
        rank = ranks[problem.node_id]
        stage = next(i for i, end in enumerate(progressive_stages(10**9)) if rank < end)
        return stage, ALL_CATEGORIES.index(problem.payload.category), rank

    return sorted(problems, key=key)
