"""Generated-data quality as a test suite: one item per generated problem
(`test_datagen[<id>]`, markers `datagen` and its topic). Each item's one "generation" is
the set of judge calls about it (every judge: a pointwise verdict; per reference
opponent: a comparison in both orders), plus optional solver samples; the controller
folds them into judge, win-rate, panel, judge-free and human metrics."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_agenteval.api.records import Problem, ProblemRecord, Rollout, Score, content_hash, sample_seed
from pytest_agenteval.api.suite import DataError, RolloutContext, Suite
from pytest_agenteval.config.options import Settings
from pytest_agenteval.datasets import tabular as data
from pytest_agenteval.models import SamplerError
from pytest_agenteval.tasks.datagen._checks import answer_format, checks_summary, nearest_reference, shingles
from pytest_agenteval.tasks.datagen._judge import (
    JudgeClient,
    JudgeSpec,
    judge_specs,
    local_judge,
    nonce_secret,
    openai_judge,
)
from pytest_agenteval.tasks.datagen._pairing import Opponents, pair_opponents, shown_fields, side
from pytest_agenteval.tasks.datagen._panel import panel_summary
from pytest_agenteval.tasks.datagen._prompts import pairwise_messages, pointwise_messages
from pytest_agenteval.tasks.datagen._report import gate_presets, summary_rows
from pytest_agenteval.tasks.datagen._solve import solve_item
from pytest_agenteval.tasks.datagen._stats import item_passes, item_totals, pointwise_summary
from pytest_agenteval.tasks.datagen._winrate import winrate_summary
from pytest_agenteval.tasks.datagen.data import (
    DatagenDataError,
    GeneratedProblem,
    LoadReport,
    load_generated,
    reference_from_rows,
)
from pytest_agenteval.tasks.datagen.human import agreement_with_judges, human_summary, verifications_path

DEFAULT_REFERENCE = "math-ai/aime25"  # the design documents' comparison set (AIME 2025, 30 problems)
SCORE_FIELDS = ("item_mean", "item_pass", "valid_verdicts", "checks")
NO_DATA_ID = "no-data"
NO_DATA_REASON = (
    "the datagen suite needs --datagen-path FILE.jsonl (lines with problem, answer, solution, topic)"
)


class Datagen(Suite):
    name = "datagen"
    markers = {"datagen": "generated problems (suite datagen)"}
    version = "1"  # the judges' prompts and verdicts, the win rates and checks
    title = "Generated-data quality: LLM judges, win rates, judge-free checks"
    size_unknown = "your file (--datagen-path FILE.jsonl)"
    group_kind = "topics"
    groups = ("algebra", "geometry", "number_theory", "combinatorics", "probability", "other_topic")
    command_args = "--datagen-path FILE.jsonl"
    score_fields = SCORE_FIELDS

    def __init__(self) -> None:
        self._loaded: dict[tuple[Any, ...], tuple[LoadReport, list[Any]]] = {}
        self._judges: dict[int, list[JudgeClient]] = {}  # per Runtime (one per process)
        self._secrets: dict[Path | None, bytes] = {}

    # -- data ------------------------------------------------------------------------
    def _load(self, settings: Settings) -> tuple[LoadReport, list[Any]]:
        key = (settings.datagen_path, settings.reference_path)
        if key not in self._loaded:
            if not settings.datagen_path:
                raise DataError(NO_DATA_REASON)
            try:
                report = load_generated(Path(settings.datagen_path).expanduser())
                references = self._references(settings)
            except DatagenDataError as exc:
                raise DataError(str(exc)) from None
            self._loaded[key] = (report, references)
        return self._loaded[key]

    def _references(self, settings: Settings) -> list[Any]:
        source = settings.reference_path or DEFAULT_REFERENCE
        try:
            rows = data.load_rows(source, option="--reference-path")
        except DataError as exc:
            if settings.reference_path:
                raise
            raise DataError(
                f"cannot load the reference set {DEFAULT_REFERENCE} from the hub ({exc}); "
                "for offline runs pass --reference-path FILE.jsonl"
            ) from None
        return reference_from_rows(rows, f"--reference-path {source}")

    def load(self, settings: Settings) -> list[Problem]:
        if not settings.datagen_path:
            # not a collection error: `pytest suites -m aime25` must not break on this file
            return [Problem(self.name, NO_DATA_ID, 0, "", None, ("datagen",), None)]
        report, references = self._load(settings)
        opponents = pair_opponents(report.problems, references, settings.datagen_opponents, settings.seed)
        pool = [(r.problem_id, shingles(r.problem)) for r in references]
        return [
            Problem(
                self.name,
                item.problem_id,
                item.index,
                item.problem,
                item.answer,
                ("datagen", item.marker),
                DatagenItem(item, opponents[item.problem_id], nearest_reference(item.problem, pool)),
            )
            for item in report.problems
        ]

    def admission(self, problem: Problem, settings: Settings, history: Mapping[str, Sequence[bool]]) -> str:
        if problem.payload is None:
            return NO_DATA_REASON
        return "run"

    def samples(self, settings: Settings) -> int:
        return 1  # one bundle of judge calls per item; --datagen-solve sets the solver's N

    def sampling(self, settings: Settings) -> dict[str, Any]:
        """Judges decode greedily with a short budget unless the user says otherwise."""
        sampling = super().sampling(settings)
        for name, value in (("temperature", 0.0), ("top_p", 1.0), ("max_tokens", 512)):
            if name not in settings.explicit:
                sampling[name] = value
        return sampling

    # -- judges ----------------------------------------------------------------------
    def _clients(self, ctx: RolloutContext) -> list[JudgeClient]:
        runtime = ctx.resources
        clients = self._judges.get(id(runtime))
        if clients is None:
            specs = judge_specs(ctx.settings.judge_endpoints, ctx.settings.judge_models)
            cache = _cache_of(runtime)
            clients = []
            for spec in specs:
                if spec.endpoints:
                    clients.append(
                        openai_judge(spec, ctx.settings, runtime.concurrency, cache, budget=runtime.budget)
                    )
                elif runtime.choice.kind == "openai":  # the run's own endpoint: negotiate too
                    own = JudgeSpec(runtime.choice.label, runtime.choice.endpoints, runtime.choice.model_name)
                    clients.append(
                        openai_judge(
                            own, ctx.settings, runtime.concurrency, cache, ctx.sampler, runtime.budget
                        )
                    )
                else:
                    grammar = runtime.choice.kind in ("embedded", "gguf")  # llama.cpp compiles the schema
                    clients.append(local_judge(JudgeSpec(runtime.choice.label), ctx.sampler, grammar))
            for client in clients:
                runtime.finalizers.append(client.aclose)
            self._judges[id(runtime)] = clients
        return clients

    def _secret_for(self, cache_dir: Path | None) -> bytes:
        if cache_dir not in self._secrets:
            self._secrets[cache_dir] = nonce_secret(cache_dir)
        return self._secrets[cache_dir]

    async def rollout(self, ctx: RolloutContext) -> Rollout:
        item: DatagenItem = ctx.problem.payload
        secret = self._secret_for(ctx.resources.cache_dir)
        calls = []
        for client in self._clients(ctx):
            calls.append(_pointwise(ctx, client, item, secret))
            for reference in item.opponents.references:
                for order in ("generated_first", "reference_first"):
                    calls.append(_pairwise(ctx, client, item, reference, order, secret))
        if ctx.settings.datagen_solve:
            calls.append(solve_item(ctx, item.generated, ctx.settings.datagen_solve))
        started = time.perf_counter()
        results = await asyncio.gather(*calls)
        solve = results.pop() if ctx.settings.datagen_solve else None
        if results and all(r["status"] == "error" for r in results):
            # no judge answered at all: an infrastructure error of the item, not a verdict
            raise SamplerError(f"every judge call failed; first: {results[0]['error']}")
        return Rollout(
            text="",
            stop_reason="judged",
            prompt_tokens=sum(r.get("prompt_tokens", 0) for r in [*results, solve or {}]),
            completion_tokens=sum(r.get("completion_tokens", 0) for r in [*results, solve or {}]),
            latency_s=time.perf_counter() - started,
            attempts=sum(r.get("attempts", 0) for r in results),
            retries=sum(r.get("retries", 0) for r in results),
            cached=all(r.get("cached", False) for r in results),
            extra={"judgments": list(results), "solve": solve, "topic_matched": item.opponents.topic_matched},
        )

    # -- scoring ---------------------------------------------------------------------
    def score(self, problem: Problem, rollout: Rollout, settings: Settings) -> Score:
        item: DatagenItem = problem.payload
        pointwise = [j for j in rollout.extra.get("judgments", ()) if j["kind"] == "pointwise"]
        totals = item_totals(pointwise)
        passed = item_passes(pointwise)
        checks = {
            "id": problem.id,
            "answer_format": answer_format(item.generated.answer),
            "duplicate": item.duplicate,
            "solve": rollout.extra.get("solve"),
        }
        fields = {
            "item_mean": round(sum(totals) / (4 * len(totals)), 6) if totals else None,
            "item_pass": passed,
            "valid_verdicts": len(totals),
            "checks": checks,
        }
        return Score(bool(passed), bool(totals), fields["item_mean"], fields)

    def prompt_hash(self, problem: Problem, settings: Settings) -> str:
        return content_hash(
            [problem.payload.generated.sha256, [r.problem_id for r in problem.payload.opponents.references]]
        )

    def category_of(self, problem: Problem) -> str:
        return problem.payload.generated.marker if problem.payload is not None else "no_data"

    def problem_extra(self, problem: Problem) -> dict[str, Any]:
        item: GeneratedProblem = problem.payload.generated
        return {
            "topic": item.topic,
            "line": item.line,
            "item_sha256": item.sha256,
            "repairs": list(item.repairs),
            "opponents": [r.problem_id for r in problem.payload.opponents.references],
        }

    def describe(self, settings: Settings) -> dict[str, Any]:
        report, references = self._load(settings)
        specs = judge_specs(settings.judge_endpoints, settings.judge_models)
        reference = settings.reference_path or DEFAULT_REFERENCE
        return {
            "dataset": settings.datagen_path,
            # provenance as AIME records it: the file's sha256; the reference set's sha256, or
            # its hub id with the commit it resolved to
            **(data.describe_source(settings.datagen_path, None) if settings.datagen_path else {}),
            "reference_source": data.describe_source(reference, None),
            "mode": "judge",
            "reference": reference,
            "reference_problems": len(references),
            "judges": [s.name if s.endpoints else "run-model" for s in specs],
            "opponents_per_item": settings.datagen_opponents,
            "load": {
                "lines": report.lines,
                "loaded": len(report.problems),
                "load_errors": list(report.load_errors),
                "repaired_items": report.repaired_items,
                "repairs": sum(len(p.repairs) for p in report.problems),
            },
        }

    def summarize(self, records: Sequence[ProblemRecord], settings: Settings) -> dict[str, Any]:
        judgments = [
            (r, j) for r in records for g in r.generations for j in g.rollout.extra.get("judgments", ())
        ]
        per_item = [[j for rr, j in judgments if rr is r and j["kind"] == "pointwise"] for r in records]
        judges = sorted({j["judge"] for _, j in judgments})
        table = {
            str(r.problem_id): {
                j["judge"]: (j["scores"] if j.get("status") == "valid" else None) for j in item
            }
            for r, item in zip(records, per_item, strict=True)
        }
        summary = {
            "problems": len(records),
            "generations": sum(len(r.generations) for r in records),
            "judge": pointwise_summary(per_item, settings.seed),
            "winrate": winrate_summary(_pairs(records, judgments), settings.seed),
            "panel": panel_summary(table, judges, settings.seed),
            "checks": checks_summary([g.score.fields["checks"] for r in records for g in r.generations]),
            "human": self._human(records, settings, table),
        }
        summary["gate_presets"] = gate_presets(summary)
        return summary

    def _human(
        self, records: Sequence[ProblemRecord], settings: Settings, table: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        if not settings.datagen_path:
            return None
        path = Path(settings.datagen_verifications or verifications_path(Path(settings.datagen_path)))
        summary = human_summary(path, {str(r.problem_id): r.extra.get("item_sha256", "") for r in records})
        if summary is not None and "error" not in summary:
            summary["judges"] = agreement_with_judges(path, table)
        return summary

    def summary_rows(self, summary: Mapping[str, Any]) -> list[tuple[str, str]]:
        return summary_rows(summary)

    def item_passed(self, record: ProblemRecord) -> bool:
        return any(g.score.fields.get("item_pass") for g in record.generations)

    def failure_message(self, record: ProblemRecord) -> str:
        judgments = [j for g in record.generations for j in g.rollout.extra.get("judgments", ())]
        pointwise = [j for j in judgments if j["kind"] == "pointwise"]
        valid = [j for j in pointwise if j.get("status") == "valid"]
        if not valid:
            reasons = "; ".join(f"{j['judge']}: {j.get('status')} ({j.get('error')})" for j in pointwise)
            return f"no valid verdict: {reasons}"
        means = ", ".join(f"{j['judge']} {sum(j['scores'].values()) / 4:.2f}" for j in valid)
        return f"panel mean below 3.5 ({means})"


class DatagenItem:
    """A problem's payload: the generated item, its opponents, its nearest reference."""

    def __init__(self, generated: GeneratedProblem, opponents: Opponents, duplicate: dict[str, Any]) -> None:
        self.generated = generated
        self.opponents = opponents
        self.duplicate = duplicate


def _cache_of(runtime: Any) -> Any:
    if runtime.cache is not None or runtime.cache_dir is None:
        return runtime.cache
    from pytest_agenteval.models.cache import GenerationCache

    runtime.cache = GenerationCache(runtime.cache_dir)
    return runtime.cache


def _params(ctx: RolloutContext, *parts: str) -> Any:
    seed = sample_seed(ctx.settings.seed, "\x1f".join((str(ctx.problem.id), *parts)), 0)
    return ctx.params(seed=seed)


async def _pointwise(
    ctx: RolloutContext, client: JudgeClient, item: DatagenItem, secret: bytes
) -> dict[str, Any]:
    from pytest_agenteval.tasks.datagen._judge import derive_nonce

    g = item.generated
    nonce = derive_nonce(secret, g.sha256, client.spec.name, "pointwise")
    messages = pointwise_messages(g.problem, g.answer, g.solution, nonce)
    params = _params(ctx, client.spec.name, "pointwise")
    return await client.judge("pointwise", messages, nonce, params, ctx.settings.datagen_reasks)


async def _pairwise(
    ctx: RolloutContext, client: JudgeClient, item: DatagenItem, reference: Any, order: str, secret: bytes
) -> dict[str, Any]:
    from pytest_agenteval.tasks.datagen._judge import derive_nonce

    g = item.generated
    fields = shown_fields(g, reference)
    ours, theirs = side(g, fields), side(reference, fields)
    first, second = (ours, theirs) if order == "generated_first" else (theirs, ours)
    nonce = derive_nonce(secret, g.sha256, client.spec.name, "pairwise", reference.problem_id, order)
    params = _params(ctx, client.spec.name, "pairwise", reference.problem_id, order)
    messages = pairwise_messages(first, second, nonce)
    result = await client.judge("pairwise", messages, nonce, params, ctx.settings.datagen_reasks)
    result.update(
        opponent=reference.problem_id,
        order=order,
        shown_fields=list(fields),
        generated_chars=sum(len(v) for v in ours.values()),
        reference_chars=sum(len(v) for v in theirs.values()),
    )
    return result


def _pairs(records: Sequence[ProblemRecord], judgments: Sequence[tuple[ProblemRecord, dict]]) -> list[dict]:
    games: dict[tuple[str, str, str], dict[str, Any]] = {}
    for record, j in judgments:
        if j["kind"] != "pairwise":
            continue
        key = (str(record.problem_id), j["judge"], str(j["opponent"]))
        entry = games.setdefault(key, {"item": key[0], "judge": key[1], "opponent": key[2]})
        entry["first" if j["order"] == "generated_first" else "second"] = j
        entry["generated_chars"], entry["reference_chars"] = j["generated_chars"], j["reference_chars"]
    return [g for g in games.values() if "first" in g and "second" in g]
