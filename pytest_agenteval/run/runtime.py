"""Per-process orchestration: problems, the engine, the sampler and shared tools, and
turning one item's N rollouts into a scored ProblemRecord."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import dataclasses
import functools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_agenteval.api.progress import note_tool_calls
from pytest_agenteval.api.records import (
    GenerationRecord,
    Problem,
    ProblemRecord,
    Rollout,
    generation_from_dict,
    sample_seed,
)
from pytest_agenteval.api.sampler import (
    SERVER_WAIT,
    Completion,
    RequestCollected,
    collecting_requests,
    note_served,
    served_by,
)
from pytest_agenteval.api.suite import RolloutContext, Suite
from pytest_agenteval.config.options import Settings
from pytest_agenteval.models import BudgetExceeded, FatalRequestError, ModelChoice, ReplaySource, make_sampler
from pytest_agenteval.run.counters import Counters
from pytest_agenteval.run.engine import URGENT, Engine

MAX_ERRORS_SHOWN = 3


REFILL_POLL_S = 0.05  # how often an item waiting on its rollouts looks for room ahead


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


class Runtime:
    def __init__(
        self,
        settings: Settings,
        choice: ModelChoice,
        concurrency: int,
        cache_dir: Path | None = None,
        sandbox_workers: int = 8,
        models: Mapping[str, ModelChoice] | None = None,
        model_ready: Callable[[str], bool] | None = None,
    ) -> None:
        self.settings = settings
        self.sandbox_workers = sandbox_workers  # this process's share
        self.cache_dir = cache_dir
        # label -> choice: a sweep's models in order (the first is the reference), else the
        # one model under the label "" (Problem.model of a one-model run)
        self.models: dict[str, ModelChoice] = dict(models) if models else {"": choice}
        self.choice = next(iter(self.models.values()))  # the reference model
        # whether a model's server is up (a sweep launched one after another): nothing runs
        # ahead into a model that is not
        self.model_ready: Callable[[str], bool] = model_ready or (lambda label: True)
        self.concurrency = concurrency
        self._problems: dict[str, list[Problem]] = {}
        self._submitted: set[tuple[str, str]] = set()  # (suite, node id) in the engine
        self._engine: Engine | None = None
        self._samplers: dict[str, Any] = {}  # label -> its sampler (under the budget and cache)
        self._sandbox: Any = None
        self.cache: Any = None
        self.history: dict[str, dict[str, list[bool]]] = {}  # suite -> category -> verdicts
        self.agents: dict[str, Any] = {}  # suite -> the user's agent, from `agenteval_agent`
        self._agent_known: set[str] = set()
        self.fatal_error: str | None = None  # a refusal (401/404...) that ends the run
        self._shared: dict[tuple[str, str, int], list[Any]] = {}  # group -> [task, readers left]
        self.progress = Counters()  # for the live progress line
        self.finalizers: list[Any] = []  # async closers of what suites started here (judges)
        self.budget: Any = (
            None  # models.cost.budget.RunBudget: --max-cost, --max-total-tokens (plugin/cost.py)
        )

    # -- problems ----------------------------------------------------------------------
    def problems(self, suite: Suite) -> list[Problem]:
        if suite.name not in self._problems:
            self._problems[suite.name] = suite.load(self.settings)
        return self._problems[suite.name]

    # -- lazily started resources ------------------------------------------------------
    @property
    def sampler(self) -> Any:
        """The reference model's sampler (a one-model run's only one)."""
        return self.sampler_for(next(iter(self.models)))

    @property
    def _sampler(self) -> Any:
        """The reference model's sampler if something started it."""
        return self._samplers.get(next(iter(self.models)))

    def sampler_for(self, label: str) -> Any:
        """The sampler of model `label` (a sweep's; "" in a one-model run), started when
        first asked for. Every model's goes under the budget and the one generation cache,
        whose key holds the model's identity (name, weights fingerprint)."""
        sampler = self._samplers.get(label)
        if sampler is not None:
            return sampler
        choice = self.models[label]
        home = self.cache_dir / "sdk-home" if self.cache_dir is not None else None
        sampler = make_sampler(choice, self.settings, self.concurrency, home)
        # the budget under the cache: a cache hit never reaches it and is never charged
        if self.budget is not None and not isinstance(sampler, ReplaySource):
            from pytest_agenteval.models.cost.prices import billed_name

            sampler = self.budget.wrap(sampler, billed_name(choice))
        if self.cache_dir is not None and not isinstance(sampler, ReplaySource):
            from pytest_agenteval.models.cache import CachingSampler, GenerationCache

            if self.cache is None:
                self.cache = GenerationCache(self.cache_dir)
            sampler = CachingSampler(sampler, self.cache, self.settings.model_revision or "")
        self._samplers[label] = sampler
        return sampler

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            local = self.choice.kind in ("embedded", "gguf")
            # in-process models run one call at a time: a short queue keeps them busy
            slots = self.concurrency * max(1, len(self.choice.endpoints))  # C per endpoint
            active = 4 if local else 2 * slots + self.sandbox_workers
            if self.choice.kind == "transformers":
                # all N samples of a problem in flight at once (they are one batch), and
                # the next problem's gathering while this one generates
                active = max(4, 2 * self.settings.val_n)
            self._engine = Engine(max_active=active, whole_items=self.choice.kind == "transformers")
        return self._engine

    @property
    def started_engine(self) -> Engine | None:
        """The engine if something started it (another thread must not create one)."""
        return self._engine

    def sandbox(self) -> Any:
        if self._sandbox is None:
            from pytest_agenteval.sandbox import Sandbox, SandboxConfig, probe_containment, shortfall

            level = self.settings.sandbox_level
            problem = shortfall(probe_containment(level))
            if problem:  # the controller checked its machine at start-up; a remote worker's is another
                raise RuntimeError(f"--sandbox-level {level}: this machine cannot give it: {problem}")
            self._sandbox = Sandbox(
                SandboxConfig(
                    timeout_s=self.settings.sandbox_timeout,
                    workers=self.sandbox_workers,
                    level=self.settings.sandbox_level,
                )
            )
        return self._sandbox

    def containment_level(self) -> str:
        return self.sandbox().containment.get("level", "unknown")

    async def run_code(self, code: str, ctx: RolloutContext, call_index: int, auto_print: bool = True) -> Any:
        """One sandboxed code call of a rollout; cached per (sample, call, code) so a
        resumed trajectory sees the same observations."""
        note_tool_calls()  # the live progress line moves with each call
        key = None
        if self.cache is not None:
            # what changes the outcome (v2: results carry the raw streams)
            sandbox = (self.settings.sandbox_timeout, self.settings.sandbox_level, auto_print, "v2")
            key = self.cache.tool_key(
                ctx.problem.suite, ctx.problem.node_id, ctx.seed, call_index, code, sandbox
            )
            hit = self.cache.get_tool(key)
            if hit is not None:
                return hit
        result = await self.sandbox().run(code, auto_print)
        if key is not None and result.status != "sandbox_error":
            self.cache.put_tool(key, result)
        return result

    # -- rollouts ----------------------------------------------------------------------
    def sample_count(self, suite: Suite, problem: Problem) -> int:
        sampler = self.sampler_for(problem.model)
        if isinstance(sampler, ReplaySource) and "val_n" not in self.settings.explicit:
            return sampler.sample_count(problem.id) or suite.samples(self.settings)
        return suite.samples(self.settings)

    async def _rollout(self, suite: Suite, problem: Problem, sample_index: int) -> Rollout:
        sampler = self.sampler_for(problem.model)
        if isinstance(sampler, ReplaySource):
            recorded = sampler.generation(problem.id, sample_index)
            rollout = generation_from_dict(
                {"sample_index": sample_index, "seed": 0, **recorded}, suite.score_fields
            ).rollout
            return dataclasses.replace(rollout, attempts=0, retries=0)  # nothing was sent
        seed = sample_seed(self.settings.seed, problem.id, sample_index)
        ctx = RolloutContext(
            self.settings,
            sampler,
            problem,
            sample_index,
            seed,
            self,
            suite.sampling(self.settings),
            self.sample_count(suite, problem),
        )
        served_by.set({})  # this rollout's task only: what served it (models note it)
        began = time.monotonic()
        rollout = await suite.rollout(ctx)
        wall = time.monotonic() - began
        served = served_by.get()
        waited = served.pop(SERVER_WAIT, 0.0) if served else 0.0
        if waited:  # its model's server started meanwhile (a sweep's later wave): not latency
            # Take out only the part of the wait inside the rollout's latency: a rollout timed
            # from its own start (retool) holds the wait; one timed by its completions (a
            # single turn, BFCL) does not, as the sampler times a request after the wait. Both
            # lie within the rollout's wall time, so they overlap by latency + wait - wall.
            inside = min(waited, max(0.0, rollout.latency_s + waited - wall))
            rollout = dataclasses.replace(rollout, latency_s=max(0.0, rollout.latency_s - inside))
        if served:  # the reply's own model and system_fingerprint, with the generation
            rollout = dataclasses.replace(rollout, extra={**rollout.extra, **served})
        return rollout

    async def counted_rollout(self, suite: Suite, problem: Problem, sample_index: int) -> Rollout:
        """Sample `sample_index` of the problem (its seed is the run's for that sample),
        counted on the progress line; run it on the engine."""
        with self.progress.rollout() as tally:
            try:
                rollout = await self._rollout(suite, problem, sample_index)
            except Exception:
                self.progress.failed(tally)
                raise
        self.progress.finished(rollout, tally)
        return rollout

    def cached_rollout(self, suite: Suite, problem: Problem, sample_index: int) -> Rollout | None:
        """Sample `sample_index` of the problem from the generation cache alone, or None: a
        request would be needed (or there is no cache). Waits on the engine loop; nothing is
        sent (the cache's misses raise, as when --batch gathers requests)."""
        if self.cache_dir is None or isinstance(self.sampler_for(problem.model), ReplaySource):
            return None

        async def from_cache() -> Rollout | None:
            token = collecting_requests.set([])
            try:
                return await self._rollout(suite, problem, sample_index)
            except RequestCollected:
                return None
            finally:
                collecting_requests.reset(token)

        return self.engine.run(from_cache())

    def _submit(self, suite: Suite, problem: Problem, order: float) -> list[cf.Future[Rollout]]:
        self._submitted.add((suite.name, problem.node_id))
        return self.engine.submit_all(
            (
                (suite.name, problem.node_id, j),
                functools.partial(self.counted_rollout, suite, problem, j),
                (order, j),
            )
            for j in range(self.sample_count(suite, problem))
        )

    def prefetch(self, upcoming: Iterable[tuple[Suite, Problem, float]]) -> None:
        """Start the rollouts of items pytest will run soon (each `may_run_ahead`)."""
        for suite, problem, order in upcoming:
            self._submit(suite, problem, order)

    def may_run_ahead(self, suite: Suite, problem: Problem) -> bool:
        if suite.uses_agent and suite.name not in self._agent_known:
            return False  # the agent fixture has not been set up yet: nothing to run ahead
        if problem.model and not self.model_ready(problem.model):
            return False  # its server is not up yet: waiting on it ahead would hold the engine
        return self.admission(suite, problem) == "run"

    def submitted(self, suite: Suite, problem: Problem) -> bool:
        """Whether the item's rollouts are in the engine (running, queued or finished)."""
        return (suite.name, problem.node_id) in self._submitted

    async def shared_request(self, key: tuple[str, str, int], readers: int, request: Any) -> Any:
        """One request whose result several samples read (`n`); on the engine loop."""
        entry = self._shared.get(key)
        if entry is None:
            entry = self._shared[key] = [asyncio.ensure_future(request()), readers]
        entry[1] -= 1
        if entry[1] == 0:
            del self._shared[key]
        result = await asyncio.shield(entry[0])
        for completion in result if isinstance(result, list) else ():  # the task noted it for one reader
            if isinstance(completion, Completion):
                note_served(completion)
        return result

    def set_agent(self, suite: Suite, agent: Any) -> None:
        if agent is not None:
            self.agents[suite.name] = agent
        self._agent_known.add(suite.name)

    def admission(self, suite: Suite, problem: Problem) -> str:
        return suite.admission(problem, self.settings, self.history.get(suite.name, {}))

    def forget(self, keep: Iterable[tuple[str, str]]) -> None:
        """Drop queued rollouts of items no longer scheduled here (stolen by another worker)."""
        wanted = set(keep)
        stale = [key for key in self.engine.pending_keys() if key[:2] not in wanted]
        self.engine.release(stale)
        self._submitted.intersection_update(wanted)

    def evaluate(
        self, suite: Suite, problem: Problem, nodeid: str, refill: Callable[[], None] | None = None
    ) -> ProblemRecord:
        """Wait for the item's N rollouts (prefetched or not) and score them here, on the
        main thread, where math-verify's timeout works. While it waits, `refill()` runs
        whenever the engine has room: a slow rollout of this item (a retry, a stall, a
        long generation) must not leave the engine idle behind it."""
        futures = self._submit(suite, problem, URGENT)
        if refill is None:
            cf.wait(futures)
        else:
            while cf.wait(futures, timeout=REFILL_POLL_S).not_done:
                if self.engine.has_room():
                    refill()
        generations: list[GenerationRecord] = []
        errors: list[str] = []
        budget: BudgetExceeded | None = None  # the samples the budget did not send: one line
        for index, future in enumerate(futures):
            seed = sample_seed(self.settings.seed, problem.id, index)
            try:
                rollout = future.result()
                score = suite.score(problem, rollout, self.settings)
            except BudgetExceeded as exc:
                budget = exc
                continue
            except Exception as exc:  # noqa: BLE001 - recorded as this item's error
                errors.append(f"sample {index}: {one_line(exc)}")
                if isinstance(exc, FatalRequestError):
                    self.fatal_error = str(exc)
                continue
            generations.append(GenerationRecord(index, seed, rollout, score))
        if budget is not None:
            errors.append(one_line(budget))
        self.engine.release((suite.name, problem.node_id, j) for j in range(len(futures)))
        self._submitted.discard((suite.name, problem.node_id))
        passed = any(g.score.correct for g in generations)
        self.history.setdefault(suite.name, {}).setdefault(suite.category_of(problem), []).append(passed)
        return self.record(suite, problem, nodeid, generations, errors, val_n=len(futures))

    def record(
        self,
        suite: Suite,
        problem: Problem,
        nodeid: str,
        generations: Sequence[GenerationRecord],
        errors: Sequence[str] = (),
        val_n: int | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> ProblemRecord:
        """The item's record of its scored generations (val_n: how many were asked for;
        by default those given: sequential mode's draws of the problem)."""
        return ProblemRecord(
            suite=suite.name,
            problem_id=problem.id,
            index=problem.index,
            problem=problem.text,
            ground_truth=problem.reference,
            val_n=len(generations) if val_n is None else val_n,
            generations=tuple(generations),
            markers=problem.markers,
            error=_join_errors(errors),
            nodeid=nodeid,
            prompt_hash=suite.prompt_hash(problem, self.settings),
            # a sweep's problem line names its model
            extra={
                "suite_version": suite.version,  # every results line records it (issue 33)
                **suite.problem_extra(problem),
                **({"model": problem.model} if problem.model else {}),
                **(extra or {}),
            },
        )

    def backend_counts(self) -> dict[str, int]:
        """This process's request counters (sent, ok, retries by cause, cache hits), and
        `sandbox_without_<layer>` = 1 for each layer its sandbox's level went without."""
        counts: dict[str, int] = {}
        for sampler in self._samplers.values():  # summed over a sweep's models
            if hasattr(sampler, "stats"):
                for key, value in sampler.stats().items():
                    if isinstance(value, int):
                        counts[key] = counts.get(key, 0) + value
        if self._sandbox is not None:  # auto takes what works here: count what it went without
            counts.update({f"sandbox_without_{layer}": 1 for layer in self._sandbox.containment["missing"]})
        return counts

    def concurrency_report(self) -> list[dict[str, Any]]:
        """`--concurrency auto`: this process's limit on each endpoint and its changes
        (the sampler's stats keep them); empty with a fixed --concurrency."""
        return [
            entry
            for sampler in self._samplers.values()
            if hasattr(sampler, "stats")
            for entry in sampler.stats().get("concurrency", [])
        ]

    def storage_notes(self) -> list[str]:
        """This process's generation-cache problems (a full disk, corrupt segments)."""
        return list(self.cache.notes) if self.cache is not None else []

    def in_flight(self) -> int:
        """Requests running now (for in-process models: rollouts running)."""
        inners = [getattr(s, "inner", s) for s in self._samplers.values()]
        if inners and all(hasattr(inner, "in_flight") for inner in inners):
            return sum(int(inner.in_flight) for inner in inners)
        return self._engine.active if self._engine is not None else 0

    def close(self) -> list[str]:
        """Stop everything this process started; returns problems instead of raising."""
        engine, self._engine = self._engine, None
        if engine is None:
            return []
        finalizers = [s.aclose for s in self._samplers.values() if hasattr(s, "aclose")]
        finalizers.extend(self.finalizers)
        if self._sandbox is not None:
            finalizers.append(self._sandbox.aclose)
        return engine.close(finalizers)


def _join_errors(errors: Sequence[str]) -> str | None:
    if not errors:
        return None
    shown = "; ".join(errors[:MAX_ERRORS_SHOWN])
    more = len(errors) - MAX_ERRORS_SHOWN
    return shown + (f" (+{more} more)" if more > 0 else "")
