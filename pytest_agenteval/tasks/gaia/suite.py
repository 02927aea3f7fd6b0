"""GAIA as a test suite: one item per task (id = task_id), markers level1..level3."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_agenteval.api.metrics import accuracy_intervals, shown
from pytest_agenteval.api.records import Problem, ProblemRecord, Rollout, Score, content_hash
from pytest_agenteval.api.suite import DataError, RolloutContext, Suite, shown_answers
from pytest_agenteval.config.options import Settings
from pytest_agenteval.tasks.gaia._agent import default_agent, run_user_agent
from pytest_agenteval.tasks.gaia._data import GaiaDataError, GaiaTask, GaiaUnavailable, load_gaia
from pytest_agenteval.tasks.gaia._extract import extract_final_answer
from pytest_agenteval.tasks.gaia._metrics import GaiaItemResult, summarize_gaia
from pytest_agenteval.tasks.gaia._scorer import score_with_reason
from pytest_agenteval.tasks.gaia._submission import write_submission

UNAVAILABLE_ID = "gaia-unavailable"
SCORE_FIELDS = ("model_answer", "extraction", "rule", "reason", "scored")


class Gaia(Suite):
    name = "gaia"
    version = "1"  # the default agent's prompt, the official quasi-exact-match scorer, per level
    title = "GAIA: assistant tasks with files and tools, by level (gated on the hub: HF_TOKEN)"
    size_unknown = "from the hub (gated: HF_TOKEN), or --gaia-path DIR"
    group_kind = "levels"
    groups = ("level1", "level2", "level3")
    score_fields = SCORE_FIELDS
    uses_agent = True

    def __init__(self) -> None:
        self.unavailable: str | None = None

    def load(self, settings: Settings) -> list[Problem]:
        token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
        try:
            tasks = load_gaia(settings.gaia_split, settings.gaia_path, token)
        except GaiaUnavailable as exc:
            # No access is not an error of the run: one item skips, saying how to get it.
            self.unavailable = str(exc)
            markers = ("gaia", "level1", "level2", "level3")  # so `-m level1` still shows why
            return [Problem(self.name, UNAVAILABLE_ID, 0, "", None, markers)]
        except GaiaDataError as exc:
            raise DataError(str(exc)) from None
        return [
            Problem(
                self.name,
                task.task_id,
                index,
                task.question,
                task.final_answer,
                ("gaia", f"level{task.level}"),
                task,
            )
            for index, task in enumerate(tasks)
        ]

    def admission(self, problem: Problem, settings: Settings, history: Mapping[str, Sequence[bool]]) -> str:
        if problem.payload is None:
            return f"GAIA unavailable: {self.unavailable}"
        return "run"

    def category_of(self, problem: Problem) -> str:
        return f"level{problem.payload.level}" if problem.payload is not None else "unavailable"

    def samples(self, settings: Settings) -> int:
        return settings.val_n if "val_n" in settings.explicit else 1

    def sampling(self, settings: Settings) -> dict[str, Any]:
        sampling = super().sampling(settings)
        if "temperature" not in settings.explicit:
            sampling["temperature"] = 0.0  # one deterministic attempt, as leaderboard runs do
        return sampling

    async def rollout(self, ctx: RolloutContext) -> Rollout:
        agent = ctx.resources.agents.get(self.name)
        if agent is not None:
            return await run_user_agent(agent, ctx.problem.payload)
        return await default_agent(ctx, ctx.problem.payload)

    def score(self, problem: Problem, rollout: Rollout, settings: Settings) -> Score:
        extracted = extract_final_answer(rollout.text)
        fields = {"model_answer": extracted.answer, "extraction": extracted.method}
        if problem.reference is None:
            return Score(False, extracted.answer is not None, extracted.answer, {**fields, "scored": False})
        verdict = score_with_reason(
            extracted.answer, problem.reference, unordered_lists=settings.gaia_unordered_lists
        )
        return Score(
            verdict.correct,
            extracted.answer is not None,
            extracted.answer,
            {**fields, "rule": verdict.rule, "reason": verdict.reason, "scored": True},
        )

    def prompt_hash(self, problem: Problem, settings: Settings) -> str:
        return content_hash([problem.text, problem.payload.file_name if problem.payload else None])

    def problem_extra(self, problem: Problem) -> dict[str, Any]:
        task: GaiaTask | None = problem.payload
        if task is None:
            return {}
        return {"level": task.level, "annotator_steps": task.annotator_steps, "file_name": task.file_name}

    def describe(self, settings: Settings) -> dict[str, Any]:
        return {
            "dataset": "gaia-benchmark/GAIA",
            "gaia_path": settings.gaia_path,
            "split": settings.gaia_split,
            "mode": "agent",
            "scorer": "gaia quasi-exact match (official)",
            "list_order": "unordered" if settings.gaia_unordered_lists else "ordered (official)",
        }

    def summarize(self, records: Sequence[ProblemRecord], settings: Settings) -> dict[str, Any]:
        results = [
            GaiaItemResult(
                task_id=str(r.problem_id),
                level=int(r.extra["level"]),
                correct=g.score.correct if g.score.fields.get("scored") else None,
                steps=g.rollout.turns,
                annotator_steps=r.extra.get("annotator_steps"),
                tokens=g.rollout.prompt_tokens + g.rollout.completion_tokens,
                latency_s=g.rollout.latency_s,
            )
            for r in records
            for g in r.generations
        ]
        scored: dict[str, list[bool]] = {str(r.problem_id): [] for r in records}
        for item in results:
            if item.correct is not None:
                scored[item.task_id].append(bool(item.correct))
        return {
            "problems": len(records),
            "generations": len(results),
            **summarize_gaia(results),
            **accuracy_intervals(
                [sum(s) for s in scored.values()], [len(s) for s in scored.values()], settings.seed
            ),
        }

    def after_run(self, records: Sequence[ProblemRecord], settings: Settings) -> dict[str, Any]:
        agents = {g.rollout.extra.get("agent", "default") for r in records for g in r.generations}
        fields: dict[str, Any] = {"agent": ", ".join(sorted(agents)) or "default"}
        if settings.gaia_split != "test" or not records:
            return fields
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = Path(settings.gaia_submission or f"agenteval-results/gaia-test-submission-{stamp}.jsonl")
        rows = [
            (str(r.problem_id), g.score.fields.get("model_answer") or "", g.rollout.text)
            for r in records
            for g in r.generations[:1]
        ]
        write_submission(path, rows)
        fields.update(
            submission=str(path), submission_tasks=len(rows), split_tasks=self._split_size(settings)
        )
        return fields

    def _split_size(self, settings: Settings) -> int | None:
        """Tasks in the split, to flag a partial submission (the leaderboard wants all)."""
        token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
        try:
            return len(load_gaia(settings.gaia_split, settings.gaia_path, token))
        except (GaiaUnavailable, GaiaDataError):
            return None

    def summary_rows(self, summary: Mapping[str, Any]) -> list[tuple[str, str]]:
        levels = summary.get("per_level") or {}
        submission = []
        if summary.get("submission"):
            written, total = summary.get("submission_tasks"), summary.get("split_tasks")
            partial = " (PARTIAL: the leaderboard expects every task)" if total and written < total else ""
            submission = [("submission", f"{summary['submission']}: {written} of {total} tasks{partial}")]
        rows = [
            (
                "exact match",
                f"{shown(summary, 'accuracy')} ({summary.get('correct')}/{summary.get('scored')} scored)",
            )
        ]
        for level, values in levels.items():
            rows.append(
                (f"  level {level}", f"{values['accuracy']:.3f} ({values['correct']}/{values['total']})")
            )
        drops = summary.get("drop_rates") or {}
        rows.append(
            ("drop rates", "  ".join(f"{k} {'-' if v is None else f'{v:.3f}'}" for k, v in drops.items()))
        )
        rows += submission
        agent, annotators = summary.get("mean_steps_correct"), summary.get("mean_annotator_steps_correct")
        if agent is None and annotators is None:  # no correct item reports steps
            rows.append(("mean steps", "n/a (no correct item with steps)"))
        else:
            rows.append(
                ("mean steps", f"agent {_steps(agent)} vs annotators {_steps(annotators)} (correct items)")
            )
        return rows

    def item_passed(self, record: ProblemRecord) -> bool:
        if record.ground_truth is None:  # test split: nothing to compare, an answer is the result
            return True
        return record.passed

    def failure_message(self, record: ProblemRecord) -> str:
        answers = [g.score.fields.get("model_answer") for g in record.generations]
        return f"expected {record.ground_truth!r}, answered {shown_answers(answers)}"


def _steps(value: Any) -> str:
    return "n/a" if value is None else f"{value:.1f}"
