"""What a benchmark suite is: problems in, one rollout per sample, a scorer, a summary.

A suite file in `suites/` binds one of these to pytest:

    from pytest_agenteval.tasks.aime25 import Aime25
    agenteval_suite = Aime25()

    def test_aime25(evaluation):
        evaluation.check()
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_agenteval.api.records import Problem, ProblemRecord, Rollout, Score, content_hash
from pytest_agenteval.api.sampler import Sampler, SamplingParams

if TYPE_CHECKING:
    from pytest_agenteval.config.options import Settings


class DataError(Exception):
    """Bad benchmark data; the message is one line naming the problem and the fix."""


@dataclass
class RolloutContext:
    """Everything one sample's rollout may use."""

    settings: Settings
    sampler: Sampler
    problem: Problem
    sample_index: int
    seed: int
    resources: Any  # the per-process Runtime: lazily started shared tools (the sandbox)
    sampling: Mapping[str, Any]  # the suite's effective temperature, top_p, top_k, max_tokens
    samples: int  # N: generations of this problem

    def params(self, max_tokens: int | None = None, seed: int | None = None) -> SamplingParams:
        return SamplingParams(
            temperature=self.sampling["temperature"],
            top_p=self.sampling["top_p"],
            top_k=self.sampling["top_k"],
            max_tokens=max_tokens or self.sampling["max_tokens"],
            seed=self.seed if seed is None else seed,
            presence_penalty=self.sampling.get("presence_penalty", 0.0),
        )


class Suite:
    """Base class: override `load`, `rollout` and `score`; the rest has defaults."""

    name: str = "suite"
    markers: Mapping[str, str] = {}
    score_fields: tuple[str, ...] = ()  # Score.fields a results file carries back
    uses_agent: bool = False  # takes the `agenteval_agent` fixture (a user's own agent)
    summarize_reads_texts: bool = False  # `summarize` gets the generations' texts too
    # The version of what decides the suite's numbers: its prompt, scorer and metrics. Every
    # results line records it (`suite_version`); `pytest-agenteval report`, `merge` and
    # `--agenteval-compare` refuse to compare runs of two versions. Bump it with any change
    # to them, and regenerate the suite's golden file (docs/writing-suites.md).
    version: str = "1"
    # What `pytest-agenteval list` shows: a title, the number of problems where it is known
    # without the data (None: "from the hub"), what the items are grouped by (categories,
    # levels, topics) and those groups (each a marker), and the options its command needs.
    title: str = ""
    size: int | None = None
    size_from: str = "the suite's metadata"  # where a known size comes from
    size_unknown: str = "from the hub"  # what `list` says where `known_size()` is None
    group_kind: str = "categories"
    groups: tuple[str, ...] = ()
    command_args: str = ""

    def known_size(self) -> int | None:
        """The number of problems, found without the network (`size` unless overridden)."""
        return self.size

    def size_notes(self) -> list[str]:
        """How `known_size` counts where it is not one problem a line of the data (BFCL's
        format sensitivity, memory and web search): one line each for `list`."""
        return []

    def load(self, settings: Settings) -> list[Problem]:
        raise NotImplementedError

    def samples(self, settings: Settings) -> int:
        return settings.val_n

    def sampling(self, settings: Settings) -> dict[str, Any]:
        """Sampling parameters this suite sends; a suite may default differently from the
        command line's defaults, never against what the user set."""
        sampling: dict[str, Any] = {
            "temperature": settings.temperature,
            "top_p": settings.top_p,
            "top_k": settings.top_k,
            "max_tokens": settings.max_tokens,
        }
        if settings.presence_penalty:  # only when set: the summaries of other runs stay as they were
            sampling["presence_penalty"] = settings.presence_penalty
        return sampling

    def admission(self, problem: Problem, settings: Settings, history: Mapping[str, Sequence[bool]]) -> str:
        """ "run", "wait" (cannot decide yet: do not prefetch) or a skip reason. `history`
        holds this process's item verdicts so far, by category (see `category_of`)."""
        return "run"

    def category_of(self, problem: Problem) -> str:
        return self.name

    def after_run(self, records: Sequence[ProblemRecord], settings: Settings) -> dict[str, Any]:
        """Side outputs written on the controller at the end (export files); returns
        fields for the summary."""
        return {}

    async def rollout(self, ctx: RolloutContext) -> Rollout:
        raise NotImplementedError

    def score(self, problem: Problem, rollout: Rollout, settings: Settings) -> Score:
        raise NotImplementedError

    def prompt_hash(self, problem: Problem, settings: Settings) -> str:
        return content_hash(problem.text)

    def describe(self, settings: Settings) -> dict[str, Any]:
        """Dataset and mode details for the summary line."""
        return {}

    def summarize(self, records: Sequence[ProblemRecord], settings: Settings) -> dict[str, Any]:
        """The suite's metrics over its scored records. They come without their texts
        (each generation's `text` is "", transcripts keep no content, output or code), so a
        long run's controller stays small; a suite whose metrics read the texts sets
        `summarize_reads_texts = True` and gets them whole, read back from disk.
        The default: Average@N, Pass@N, pass@k, maj@N and their intervals (`api.metrics`);
        an override may add to it with `super().summarize(records, settings)`."""
        from pytest_agenteval.api.metrics import summarize_math  # numpy: off the start-up path

        return summarize_math(records, bootstrap_seed=settings.seed)

    def summary_rows(self, summary: Mapping[str, Any]) -> list[tuple[str, str]]:
        """Extra (label, value) lines for the terminal table."""
        return []

    def problem_extra(self, problem: Problem) -> dict[str, Any]:
        """Suite-specific fields of a problem line (category, level, ...)."""
        return {}

    def item_passed(self, record: ProblemRecord) -> bool:
        """An item passes when at least one of its N generations is correct."""
        return record.passed

    def failure_message(self, record: ProblemRecord) -> str:
        answers = [g.score.answer for g in record.generations]
        return (
            f"{record.num_correct}/{len(record.generations)} correct; "
            f"expected {record.ground_truth!r}, answers {shown_answers(answers)}"
        )


def shown_answers(answers: Sequence[Any]) -> str:
    """`['70', no answer]`: a generation without an answer is said so, not Python's None."""
    return "[" + ", ".join("no answer" if a is None else repr(a) for a in answers) + "]"
