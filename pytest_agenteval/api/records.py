"""Plain data between the stages: problems in, rollouts and scores out, records kept."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from pytest_agenteval.api.answer import strip_thoughts

RECORD_KEY = "agenteval_record"  # a problem line in an item's user_properties, worker to controller


@dataclass(frozen=True)
class Problem:
    """One benchmark problem: one pytest item."""

    suite: str
    id: Any  # the benchmark's own stable id (int for AIME, str for BFCL/GAIA)
    index: int  # position in dataset order
    text: str
    reference: Any  # normalised ground truth (None when the split has none)
    markers: tuple[str, ...] = ()
    payload: Any = None  # suite-specific source record (a BFCL entry, a GAIA task)
    # A sweep's model label (several --model-path): the same problem is one item per model
    model: str = ""

    @property
    def node_id(self) -> str:
        return f"{self.model}:{self.id}" if self.model else str(self.id)


@dataclass(frozen=True)
class Rollout:
    """What the system under test produced for one sample."""

    text: str  # final assistant text (the last turn for multi-turn rollouts)
    stop_reason: str  # "answer" (records: "no_answer" if none found), "length", "turn_budget", ...
    finish_reason: str = "stop"
    turns: int = 1
    code_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int | None = 0  # None: unknown for this sample (see counted_tokens)
    latency_s: float = 0.0
    attempts: int = 1  # HTTP requests sent, retries included (0 when all came from the cache)
    retries: int = 0
    cached: bool = False
    transcript: tuple[Mapping[str, Any], ...] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    # A reasoning model's thoughts (the last turn's), kept apart from `text`, the answer the
    # scorer reads; None: no reasoning. `reasoning_tokens`: of completion_tokens (all turns),
    # None where the backend did not say.
    reasoning: str | None = None
    reasoning_tokens: int | None = None


# The stop reason of a generation whose reasoning never closed (cut off inside its thoughts):
# it has no answer and is scored incorrect, unformatted, whatever its thoughts hold.
THINKING_TRUNCATED = "thinking_truncated"


def answer_tokens(rollout: Rollout) -> int | None:
    """Completion tokens that were the answer: all of them without reasoning, none when
    the reasoning never closed, the rest after the reasoning where its count is known;
    else None (a reasoning generation whose backend did not say)."""
    if rollout.completion_tokens is None:
        return None
    if rollout.stop_reason == THINKING_TRUNCATED:
        return 0
    if rollout.reasoning_tokens is not None:
        return max(0, rollout.completion_tokens - rollout.reasoning_tokens)
    return rollout.completion_tokens if rollout.reasoning is None else None


def counted_tokens(rollout: Rollout) -> tuple[int, int]:
    """(prompt, completion) tokens a generation adds to a run's totals. A sample that was
    one of several of one request (`n`) carries `request_usage` in `extra`: the request's
    usage on its first sample, {} on the others, so the request counts once, as the
    server reported it. Any other sample counts its own."""
    return counted_usage(rollout.prompt_tokens, rollout.completion_tokens, rollout.extra)


def counted_usage(prompt: int, completion: int | None, extra: Mapping[str, Any]) -> tuple[int, int]:
    """`counted_tokens` of a generation's fields (a rollout's, or a results line's)."""
    usage = extra.get("request_usage")
    if isinstance(usage, Mapping):
        return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    return int(prompt or 0), int(completion or 0)


@dataclass(frozen=True)
class Score:
    """A scorer's verdict on one rollout, with the fields that explain it."""

    correct: bool
    formatted: bool
    answer: Any = None  # normalised answer, used for majority voting
    fields: Mapping[str, Any] = field(default_factory=dict)


def _stop_reason(stop_reason: str, formatted: bool) -> str:
    """A rollout that ended on its own but whose text the scorer found no answer in
    stopped with `no_answer`, not `answer`."""
    return "no_answer" if stop_reason == "answer" and not formatted else stop_reason


@dataclass(frozen=True)
class GenerationRecord:
    sample_index: int
    seed: int
    rollout: Rollout
    score: Score

    def __post_init__(self) -> None:
        # Whatever a suite's scorer made of it, a generation cut off inside its thoughts has
        # no answer: a guess in the thoughts never counts (every suite, a user's own too).
        if self.rollout.stop_reason == THINKING_TRUNCATED and (self.score.correct or self.score.formatted):
            object.__setattr__(self, "score", Score(False, False, None, self.score.fields))

    def to_dict(self) -> dict[str, Any]:
        rollout = self.rollout
        return {
            "sample_index": self.sample_index,
            "seed": self.seed,
            "text": rollout.text,
            "correct": self.score.correct,
            "formatted": self.score.formatted,
            "answer": self.score.answer,
            **dict(self.score.fields),
            "code_calls": rollout.code_calls,
            "turns": rollout.turns,
            "stop_reason": _stop_reason(rollout.stop_reason, self.score.formatted),
            "finish_reason": rollout.finish_reason,
            "prompt_tokens": rollout.prompt_tokens,
            "completion_tokens": rollout.completion_tokens,
            "latency_s": round(rollout.latency_s, 4),
            "attempts": rollout.attempts,
            "retries": rollout.retries,
            "cached": rollout.cached,
            **_reasoning_fields(rollout),
            **dict(rollout.extra),
            **({"transcript": list(rollout.transcript)} if rollout.transcript else {}),
        }


def _reasoning_fields(rollout: Rollout) -> dict[str, Any]:
    """A reasoning generation's thoughts and its token split; nothing for a generation
    without reasoning (its results line stays as before). A split that found no reasoning
    counts it as 0 tokens, and OpenAI reports 0 for a model that does not think: not reasoning."""
    reasoned = rollout.reasoning is not None or bool(rollout.reasoning_tokens)
    if not reasoned and rollout.stop_reason != THINKING_TRUNCATED:
        return {}
    return {
        "reasoning": rollout.reasoning,
        "reasoning_tokens": rollout.reasoning_tokens,
        "answer_tokens": answer_tokens(rollout),
    }


_ROLLOUT_KEYS = {f.name for f in fields(Rollout)} - {"text", "extra", "transcript"}
# derived from the other fields when a line is read back (answer_tokens)
_GENERATION_CORE = {"sample_index", "seed", "text", "correct", "formatted", "answer", "transcript"} | {
    "answer_tokens"
}


def _split_raw_line(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """A raw replay line (`{"problem_id", "sample_index", "text"}`, no `stop_reason`: not a
    results line of ours) whose text holds a think block: split as a sampler splits a reply,
    so its scorer reads the answer only and an unclosed block is `thinking_truncated`."""
    if "stop_reason" in data or "reasoning" in data or not isinstance(data.get("text"), str):
        return data
    split = strip_thoughts(data["text"])
    if split.reasoning is None:
        return data
    stop = {} if split.closed else {"stop_reason": THINKING_TRUNCATED}
    return {**data, "text": split.answer, "reasoning": split.reasoning, **stop}


def generation_from_dict(data: Mapping[str, Any], score_fields: tuple[str, ...]) -> GenerationRecord:
    """Inverse of `GenerationRecord.to_dict` for the fields a suite declares its own."""
    data = _split_raw_line(data)
    rollout_kwargs = {k: data[k] for k in _ROLLOUT_KEYS if k in data}
    rollout_kwargs.setdefault("stop_reason", "recorded")
    known = _ROLLOUT_KEYS | _GENERATION_CORE | set(score_fields)
    rollout = Rollout(
        text=data.get("text", ""),
        transcript=transcript_entries(data.get("transcript")) or None,
        extra={k: v for k, v in data.items() if k not in known},
        **rollout_kwargs,
    )
    score = Score(
        correct=bool(data.get("correct")),
        formatted=bool(data.get("formatted")),
        answer=data.get("answer"),
        fields={k: data[k] for k in score_fields if k in data},
    )
    return GenerationRecord(int(data["sample_index"]), int(data["seed"]), rollout, score)


@dataclass(frozen=True)
class ProblemRecord:
    """All N generations of one problem, as one results line."""

    suite: str
    problem_id: Any
    index: int
    problem: str
    ground_truth: Any
    val_n: int
    generations: tuple[GenerationRecord, ...]
    markers: tuple[str, ...] = ()
    error: str | None = None  # why generations are missing (infrastructure, not a wrong answer)
    nodeid: str = ""
    prompt_hash: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def num_correct(self) -> int:
        return sum(g.score.correct for g in self.generations)

    @property
    def passed(self) -> bool:
        return self.num_correct > 0

    @property
    def complete(self) -> bool:
        return self.error is None and len(self.generations) == self.val_n

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "problem",
            "suite": self.suite,
            "problem_id": self.problem_id,
            "index": self.index,
            "nodeid": self.nodeid,
            "markers": list(self.markers),
            "problem": self.problem,
            "ground_truth": self.ground_truth,
            "prompt_hash": self.prompt_hash,
            "val_n": self.val_n,
            "num_correct": self.num_correct,
            "pass_at_n": self.passed,
            "complete": self.complete,
            "error": self.error,
            **dict(self.extra),
            "generations": [g.to_dict() for g in self.generations],
        }


_PROBLEM_KEYS = {
    "type",
    "suite",
    "problem_id",
    "index",
    "nodeid",
    "markers",
    "problem",
    "ground_truth",
    "prompt_hash",
    "val_n",
    "num_correct",
    "pass_at_n",
    "complete",
    "error",
    "generations",
}


def problem_from_dict(data: Mapping[str, Any], score_fields: tuple[str, ...] = ()) -> ProblemRecord:
    return ProblemRecord(
        suite=data["suite"],
        problem_id=data["problem_id"],
        index=int(data["index"]),
        problem=data.get("problem", ""),
        ground_truth=data.get("ground_truth"),
        val_n=int(data["val_n"]),
        generations=tuple(generation_from_dict(g, score_fields) for g in data["generations"]),
        markers=tuple(data.get("markers", ())),
        error=data.get("error"),
        nodeid=data.get("nodeid", ""),
        prompt_hash=data.get("prompt_hash", ""),
        extra={k: v for k, v in data.items() if k not in _PROBLEM_KEYS},
    )


# Free text of a transcript entry (messages, code, tool output): only the results file needs it.
TRANSCRIPT_TEXT_KEYS = frozenset({"content", "output", "code", "reasoning"})


def transcript_entries(value: Any) -> tuple[Mapping[str, Any], ...]:
    """A recorded transcript as a list of messages, as every suite writes it now; an older
    GAIA line's transcript was one string: one assistant message here."""
    if not value:
        return ()
    if isinstance(value, str):
        return ({"role": "assistant", "content": value},)
    return tuple(
        entry if isinstance(entry, Mapping) else {"role": "assistant", "content": str(entry)}
        for entry in value
    )


def without_texts(data: Mapping[str, Any]) -> dict[str, Any]:
    """A problem line without what only the results file needs: each generation's text
    and reasoning, and its transcript entries' free text. Summaries, gates and comparisons read only
    the rest (status, latencies, counts, answers, extra fields)."""
    generations = []
    for generation in data.get("generations", ()):
        kept = {k: v for k, v in generation.items() if k != "text"}
        if isinstance(kept.get("reasoning"), str):  # "": the generation reasoned, its text is not kept
            kept["reasoning"] = ""
        if kept.get("transcript"):
            kept["transcript"] = [
                {k: v for k, v in entry.items() if k not in TRANSCRIPT_TEXT_KEYS}
                for entry in transcript_entries(kept["transcript"])
            ]
        generations.append(kept)
    return {**data, "generations": generations}


def content_hash(value: Any) -> str:
    """Stable short hash of JSON-able content (prompts, targets), as lm-eval logs them."""
    canonical = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def sample_seed(run_seed: int, problem_id: Any, sample_index: int) -> int:
    """Seed of sample j of problem p: a stable hash of (run seed, problem id, j), so it
    never depends on worker count, order, chunking or selection."""
    digest = hashlib.sha256(f"{run_seed}\x1f{problem_id}\x1f{sample_index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
