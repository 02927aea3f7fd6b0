"""AIME 2025 as the ReTool lab's evaluator runs it: retool (Python between turns, the default) and
text-only (one boxed answer), with the lab's prompts, scorers and record fields."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_agenteval.api.records import Problem, ProblemRecord, Rollout, Score, content_hash, sample_seed
from pytest_agenteval.api.suite import DataError, RolloutContext, Suite
from pytest_agenteval.config.options import Settings
from pytest_agenteval.datasets import tabular as data
from pytest_agenteval.scorers import MATH_SCORERS, math_verify_version, normalize_aime_answer
from pytest_agenteval.solvers.single_turn import single_turn_rollout
from pytest_agenteval.tasks.aime25._conversation import TOOLS
from pytest_agenteval.tasks.aime25._protocol import initial_messages

TEXT_ONLY_SUFFIX = "\n\nPlease reason step by step, and put your final answer within \\boxed{}."


_NUMERIC_ID = re.compile(r"[+-]?\d+")


def text_only_messages(problem: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"{problem}{TEXT_ONLY_SUFFIX}"}]


class Aime25(Suite):
    name = "aime25"
    markers = {"aime25": "AIME 2025 problems (suite aime25)"}
    version = "1"  # the lab's prompts (text-only, ReTool), the boxed/math-verify scorers, avg@N
    title = "AIME 2025 (I and II): integer answers, text-only or the ReTool tool loop"
    size = 30  # the contest's 30 problems (yentinglin/aime_2025 on the hub, or --dataset-path)
    size_from = "AIME I and II, 15 problems each"
    command_args = "--mode text-only"
    score_fields = ("predicted_answer", "boxed_answer", "reward_boxed", "scorers_disagree", "scorer")

    def _source(self, settings: Settings) -> tuple[str, str]:
        if settings.dataset_path:
            return settings.dataset_path, "--dataset-path"
        return settings.dataset_id, "--dataset-id"

    def load(self, settings: Settings) -> list[Problem]:
        source, option = self._source(settings)
        rows = data.load_rows(source, option=option, revision=settings.dataset_revision)
        where = f"{option} {source}"
        data.require_columns(rows, ("problem", "answer"), where)
        ids = [_problem_id(row.get("id", index)) for index, row in enumerate(rows)]
        data.require_unique(ids, where)
        integer_rule = settings.effective_scorer == "boxed-integer"
        problems = []
        for index, (row, problem_id) in enumerate(zip(rows, ids, strict=True)):
            text = str(row["problem"] or "").strip()
            if not text:
                raise DataError(f"{where}: problem {problem_id!r} has an empty `problem`")
            truth = _ground_truth(row["answer"], problem_id, where, integer_rule)
            problems.append(
                Problem(self.name, problem_id, index, text, truth, ("aime25",), str(row["answer"]))
            )
        return problems

    async def rollout(self, ctx: RolloutContext) -> Rollout:
        if ctx.settings.mode == "retool":
            from pytest_agenteval.tasks.aime25._retool import retool_rollout

            return await retool_rollout(ctx)
        messages = text_only_messages(ctx.problem.text)
        extra: dict[str, Any] = {}
        if ctx.settings.samples_per_request > 1 and getattr(ctx.sampler, "supports_n", False):
            completion, extra = await _from_shared_request(ctx, messages)
        else:
            completion = await ctx.sampler.complete(messages, ctx.params())
        return single_turn_rollout(completion, extra)

    def sampling(self, settings: Settings) -> dict[str, Any]:
        """Retool sends min(--max-assistant-tokens, room left) per turn: the summary
        records that cap, not the text-only --max-tokens it never sends."""
        sampling = super().sampling(settings)
        if settings.mode == "retool":
            sampling["max_tokens"] = settings.max_assistant_tokens
        return sampling

    def score(self, problem: Problem, rollout: Rollout, settings: Settings) -> Score:
        # the reward rule compares with the dataset's answer as written (reward.py), the
        # integer rule with its normalised form (eval.py)
        scorer = settings.effective_scorer
        truth = problem.payload if scorer == "math-verify-tail" else problem.reference
        return MATH_SCORERS[scorer](rollout.text, truth)

    def prompt_hash(self, problem: Problem, settings: Settings) -> str:
        if settings.mode == "retool":
            return content_hash({"messages": initial_messages(problem.text), "tools": TOOLS})
        return content_hash(text_only_messages(problem.text))

    def summarize(self, records: Sequence[ProblemRecord], settings: Settings) -> dict[str, Any]:
        """The lab's summary, plus how budgets were counted and how turns continued."""
        summary = super().summarize(records, settings)
        if settings.mode == "retool":
            for key in ("token_counting", "continuation"):
                counts: dict[str, int] = {}
                for record in records:
                    for generation in record.generations:
                        value = str(generation.rollout.extra.get(key, "unknown"))
                        counts[value] = counts.get(value, 0) + 1
                summary[key] = counts
        return summary

    def describe(self, settings: Settings) -> dict[str, Any]:
        source, _ = self._source(settings)
        return {
            "dataset": settings.dataset_path or settings.dataset_id,
            **data.describe_source(source, settings.dataset_revision),
            "mode": settings.mode,
            "scorer": settings.effective_scorer,
            "scorer_version": f"math-verify {math_verify_version()}",
        }

    def summary_rows(self, summary: Mapping[str, Any]) -> list[tuple[str, str]]:
        from pytest_agenteval.api.metrics import shown  # numpy: off the start-up path

        rows = [("mode / scorer", f"{summary.get('mode')} / {summary.get('scorer')}")]
        if summary.get("mode") == "retool":
            rows.append(
                (
                    "code calls / turns",
                    f"{shown(summary, 'mean_code_calls', 2)} / "
                    f"{shown(summary, 'mean_turns', 2)} per generation",
                )
            )
            rows.append(("sandbox", sandbox_line(summary.get("sandbox") or {})))
        return rows


def _rate(stats: Mapping[str, Any], name: str) -> str:
    value = stats.get(name)
    return "-" if value is None else f"{value:.2f}"  # None: no calls


def sandbox_line(stats: Mapping[str, Any]) -> str:
    latency = stats.get("latency_ms") or {}
    levels = stats.get("containment") or []
    line = (
        f"{stats.get('calls', 0)} calls, ok {_rate(stats, 'success_rate')}, error "
        f"{_rate(stats, 'error_rate')}, timeout {_rate(stats, 'timeout_rate')}; "
        f"p50 {_ms(latency.get('p50'))} p95 {_ms(latency.get('p95'))}; "
        f"containment {', '.join(levels) or '-'}"
    )
    if "basic" in levels:
        line += " (WEAK: only rlimits/session/uid drop; see docs/sandbox.md)"
    return line


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


async def _from_shared_request(
    ctx: RolloutContext, messages: list[dict[str, str]]
) -> tuple[Any, dict[str, Any]]:
    """`--samples-per-request K`: samples j of one group share one request with `n`; its
    seed is the seed of the group's first sample (recorded as `request_seed`)."""
    size = ctx.settings.samples_per_request
    group, index = divmod(ctx.sample_index, size)
    first = group * size
    count = min(size, ctx.samples - first)
    seed = sample_seed(ctx.settings.seed, ctx.problem.id, first)
    completions = await ctx.resources.shared_request(
        (ctx.problem.suite, ctx.problem.node_id, group),
        count,
        lambda: ctx.sampler.complete_n(messages, ctx.params(seed=seed), count),
    )
    return completions[index], {"request_seed": seed, "choice_index": index}


def _problem_id(raw: Any) -> Any:
    """eval.py `int(row.get("id", index))` where the id is numeric; other ids as they are."""
    if isinstance(raw, int) or (isinstance(raw, str) and _NUMERIC_ID.fullmatch(raw.strip())):
        return int(raw)
    return raw


def _ground_truth(raw: Any, problem_id: Any, where: str, integer_rule: bool) -> str | None:
    """The lab's `ground_truth`: the answer normalised to an integer string."""
    value = normalize_aime_answer(str(raw))
    if value is None and integer_rule:
        raise DataError(
            f"{where}: answer {raw!r} of problem {problem_id!r} is not an integer; "
            "the text-only scorer needs integer answers (or pass --scorer math-verify-tail)"
        )
    return value
