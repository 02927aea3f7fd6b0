"""Sequential mode's draws (`--agenteval-sequential`): generations drawn one at a time so
that their verdicts are exchangeable, and the run stops as soon as every gate is decided.

- The schedule: draw k picks a problem uniformly at random among the suite's selected
  problems, from sha256(run seed, "draw", k) alone, and is that problem's j-th draw, j the
  number of earlier draws of it; its generation is sample j of the problem, with the seed a
  full run gives sample j (`sample_seed`). Nothing in the schedule depends on an outcome, so
  each draw's verdict is a Bernoulli draw of mean Average@inf over the problems (the problem
  is what is random: valid for a deterministic model too), and a generation already in the
  cache (of a full run or an earlier sequential one) is such a draw like any other.
- `Decider`: one betting confidence sequence a gate (`stats.sequential.BettingCS`), fed the
  draws in their order k; it stops at the first draw after which every gate is decided, at
  the budget (N x problems draws), at a draw the cost budget refused, or at a failed draw.
  The decision is a function of the ordered draws only, so any process that reads them
  reaches the same one, and a results file's draws replay it.
- `DrawLog`: the draws of one suite shared by the run's processes (xdist workers) through a
  folder: a claim counter under flock hands out the next k, and each process appends its
  finished draws to a file of its own; every process reads them all.
- `SuiteDraws`: one process's part: keeps at most `slots` draws in flight, claims the next
  only while no decision is known and fewer than the run's slots lie past the first draw the
  decision waits for (so after the decision each slot of the run has sent at most the one
  request it had in flight), and waits until the decision is known to every draw before it."""

from __future__ import annotations

import concurrent.futures as cf
import functools
import hashlib
import json
import os
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agenteval.api.records import GenerationRecord, Problem, ProblemRecord, generation_from_dict
from pytest_agenteval.api.suite import Suite
from pytest_agenteval.models import BudgetExceeded, FatalRequestError

POLL_S = 0.02  # how often a process with nothing in flight looks for the others' draws
DECIDED, BUDGET, COST, ERROR = "decided", "budget", "cost", "error"  # why the draws stopped


def pick(run_seed: int, k: int, count: int) -> int:
    """The problem (its position among `count`) of draw k: uniform, from (run seed, k) alone."""
    digest = hashlib.sha256(f"{run_seed}\x1fdraw\x1f{k}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % count


def schedule(run_seed: int, count: int, budget: int) -> list[tuple[int, int]]:
    """(problem position, its sample index) of draws 0 .. budget - 1."""
    seen = [0] * count
    plan = []
    for k in range(budget):
        position = pick(run_seed, k, count)
        plan.append((position, seen[position]))
        seen[position] += 1
    return plan


BASELINE = "@baseline"  # GateSpec.other of a comparison with --agenteval-compare's draws
PAIRED_END = "paired"  # a stop: a paired sequence against the baseline ran out of its draws


def verdict(entry: Mapping[str, Any], label: str) -> bool | None:
    """A draw's verdict for the model `label` (a sweep's draws hold one a model; a one-model
    run's one, whatever the label); None: the draw is no observation (not scored, GAIA)."""
    correct = entry.get("correct")
    if isinstance(correct, Mapping):
        correct = correct.get(label)
    return None if correct is None else bool(correct)


@dataclass(frozen=True)
class GateSpec:
    """What a gate asks of the draws: `mean OP threshold` at confidence 1 - alpha. The mean
    is of one model's verdicts (`label`; "" in a one-model run), or with `other` of the paired
    differences label - other in [-1, 1] (a sweep's second model, or BASELINE: the verdict a
    recorded run gave the same problem and sample); `category`: only the draws of that
    category count (BFCL's per-category, GAIA's per-level accuracy: draws uniform over the
    suite are uniform over each category)."""

    key: str  # the gate's expression
    op: str
    threshold: float
    alpha: float
    label: str = ""
    other: str | None = None
    category: str | None = None

    @property
    def bounds(self) -> tuple[float, float]:
        return (-1.0, 1.0) if self.other is not None else (0.0, 1.0)


Baseline = Mapping[tuple[str, int], tuple[int, bool]]  # (problem id, sample) -> (seed, verdict)


class Decider:
    """The decision over draws added in their order (see the module's docstring). A paired
    sequence against the baseline ends at the first draw the baseline has no verdict for
    (with the same seed): the draws it may use are fixed by the schedule, never by an outcome."""

    def __init__(self, gates: Sequence[GateSpec], budget: int, baseline: Baseline | None = None) -> None:
        from pytest_agenteval.stats.sequential import BettingCS

        self.gates = list(gates)
        self.budget = budget
        self.baseline = baseline or {}
        self.sequences = {
            g.key: BettingCS(g.alpha, bounds=g.bounds, thresholds=[g.threshold]) for g in self.gates
        }
        self.ended: dict[str, int] = {}  # a paired sequence the baseline's draws ended -> at draw
        self.used = 0  # draws in the decision: 0 .. used - 1
        self.stop: str | None = None  # DECIDED, BUDGET, COST, ERROR or PAIRED_END once stopped
        self.error: str | None = None  # the failed (or refused) draw's line

    def value(self, gate: GateSpec, entry: Mapping[str, Any]) -> float | None:
        """The draw's observation for the gate, or None (not of its category, not scored)."""
        if gate.category is not None and entry.get("category") != gate.category:
            return None
        left = verdict(entry, gate.label)
        if gate.other is None or left is None:
            return None if left is None else float(left)
        if gate.other == BASELINE:
            theirs = self.baseline.get((str(entry["problem"]), int(entry["sample"])))
            if theirs is None or theirs[0] != entry["seed"]:
                self.ended.setdefault(gate.key, self.used)
                return None
            right: bool | None = theirs[1]
        else:
            right = verdict(entry, gate.other)
        return None if right is None else float(left) - float(right)

    def add(self, entry: Mapping[str, Any]) -> None:
        if self.stop is not None:
            return
        if entry.get("error"):
            self.stop, self.error = (COST if entry.get("budget") else ERROR), str(entry["error"])
            return
        for gate in self.gates:
            if gate.key in self.ended:
                continue
            observed = self.value(gate, entry)
            if observed is not None:
                self.sequences[gate.key].add(observed)
        self.used += 1
        open_ = [g for g in self.gates if self.decision(g) == "UNDECIDED"]
        if self.gates and not open_:
            self.stop = DECIDED
        elif self.gates and all(g.key in self.ended for g in open_):
            self.stop = PAIRED_END
        elif self.used >= self.budget:
            self.stop = BUDGET

    def decision(self, gate: GateSpec) -> str:
        sequence = self.sequences[gate.key]
        if sequence.n == 0:
            return "UNDECIDED"
        return sequence.decide(gate.op, gate.threshold)

    def replay(self, entries: Iterable[Mapping[str, Any]]) -> Decider:
        for entry in entries:
            self.add(entry)
        return self


def _file_name(suite: str) -> str:
    return re.sub(r"[^\w.-]", "_", suite)


class DrawLog:
    """One suite's draws in the run's shared folder: `claims` (the next k, under flock),
    `plan.json` (problems, budget) and `draws-<process>.jsonl`, one per process."""

    def __init__(self, folder: Path, suite: str) -> None:
        self.folder = folder / _file_name(suite)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.own = self.folder / f"draws-{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"
        self.entries: dict[int, dict[str, Any]] = {}
        self.claimers: dict[int, int] = {}  # draw -> the process (pid) that claimed it
        self._read: dict[Path, int] = {}  # file -> bytes read so far

    def write_plan(self, plan: Mapping[str, Any]) -> None:
        path = self.folder / "plan.json"
        if not path.exists():  # every process computes the same plan: the first one writes it
            tmp = self.folder / f".plan-{uuid.uuid4().hex}"
            tmp.write_text(json.dumps(dict(plan)), encoding="utf-8")
            os.replace(tmp, path)

    def plan(self) -> dict[str, Any] | None:
        path = self.folder / "plan.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None

    def claim(self, below: int) -> int | None:
        """The next draw index no process has claimed, or None: it would be `below` or more
        (the budget is spent, or the draws ahead of the decision are as many as may be)."""
        import fcntl  # POSIX: imported where used, so the plugin imports on Windows

        with open(self.folder / "claims", "a+", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            handle.seek(0)
            text = handle.read().strip()
            k = int(text) if text else 0
            if k >= below:
                return None
            handle.seek(0)
            handle.truncate()
            handle.write(str(k + 1))
            handle.flush()
            self.append({"claim": k, "pid": os.getpid()})  # under the lock: never a claim unnamed
        return k

    def append(self, entry: Mapping[str, Any]) -> None:
        with open(self.own, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(dict(entry), ensure_ascii=False) + "\n")
        self._take(dict(entry))

    def _take(self, entry: dict[str, Any]) -> None:
        if "claim" in entry:
            self.claimers[int(entry["claim"])] = int(entry["pid"])
        else:
            self.entries[int(entry["draw"])] = entry

    def lost(self, k: int) -> str | None:
        """Why draw k will never finish (the process that claimed it has ended), or None."""
        pid = self.claimers.get(k)
        if pid is None or pid == os.getpid():
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return f"LostDraw: the process that drew it (pid {pid}) ended before it finished"
        except PermissionError:
            return None  # alive, another user's
        return None

    def refresh(self) -> None:
        """Read the whole lines the processes appended since the last look."""
        for path in sorted(self.folder.glob("draws-*.jsonl")):
            start = self._read.get(path, 0)
            with open(path, "rb") as handle:
                handle.seek(start)
                data = handle.read()
            end = data.rfind(b"\n") + 1  # a line being written is read next time
            for line in data[:end].splitlines():
                self._take(json.loads(line))
            self._read[path] = start + end

    def ordered(self) -> list[dict[str, Any]]:
        return [self.entries[k] for k in sorted(self.entries)]


class SuiteDraws:
    """This process's draws of one suite (see the module's docstring). In a sweep each draw
    is one generation of its (problem, sample) from each of `labels`, the models the gates
    name, with the same seed: a draw finishes when every model's generation has."""

    def __init__(
        self,
        runtime: Any,  # run.runtime.Runtime
        suite: Suite,
        problems: Sequence[Problem],
        gates: Sequence[GateSpec],
        folder: Path,
        labels: Sequence[str] = ("",),
        baseline: Baseline | None = None,
    ) -> None:
        import dataclasses

        self.runtime, self.suite, self.problems = runtime, suite, list(problems)
        self.labels = list(labels)
        # each model's copy of the problems (a sweep's items are one per (model, problem))
        self.copies = {
            label: [dataclasses.replace(p, model=label) for p in self.problems] for label in self.labels
        }
        settings = runtime.settings
        self.samples = suite.samples(settings)
        self.budget = self.samples * len(self.problems)
        self.plan = schedule(settings.seed, len(self.problems), self.budget)
        self.log = DrawLog(folder, suite.name)
        self.log.write_plan(
            {
                "problems": len(self.problems),
                "samples": self.samples,
                "budget": self.budget,
                "labels": [label for label in self.labels if label],
            }
        )
        self.decider = Decider(gates, self.budget, baseline)
        self.next = 0  # the first draw not yet given to the decider
        self.positions = {p.id: i for i, p in enumerate(self.problems)}
        self._drawn: dict[int, list[dict[str, Any]]] | None = None  # record(): position -> its draws
        self.finished = False

    def _advance(self) -> None:
        self.log.refresh()
        while self.decider.stop is None and self.next in self.log.entries:
            self.decider.add(self.log.entries[self.next])
            self.next += 1

    def run(self, limits: Callable[[], tuple[int, int]]) -> None:
        """Draw until the decision is known, then wait for the draws it rests on. `limits()`,
        asked again before each claim: (this process's generations in flight at most, the
        whole run's); under `--concurrency auto` they follow the live limit, so a draw is
        sent as soon as it is submitted and none waits in a queue to go out after the
        decision. No process claims a draw the run's window or more past the first one the
        decision still waits for (a slow draw of another process holds the decision back;
        the others must not run on). A sweep's draw takes one slot a model. At the decision
        the draws submitted but not started are cancelled: never sent, never written."""
        if self.finished:
            return
        width = len(self.labels)
        in_flight: dict[cf.Future[Any], tuple[int, str]] = {}
        pending: dict[int, dict[str, Callable[[], Any]]] = {}  # draw -> its models' results so far
        dropped: set[int] = set()  # draws cancelled at the decision: never made, never written
        cancelled = False
        while True:
            self._advance()
            if self.decider.stop is not None and in_flight and not cancelled:
                cancelled = True  # queued draws never start: the decision needs none of them
                self.runtime.engine.release(self._key(k, label) for k, label in in_flight.values())
            slots, window = limits()
            while self.decider.stop is None and len(in_flight) + width <= max(width, slots):
                k = self.log.claim(min(self.budget, self.next + max(1, window // width)))
                if k is None:
                    break
                position, sample = self.plan[k]
                results: dict[str, Callable[[], Any]] = {}
                for label in self.labels:
                    problem = self.copies[label][position]
                    hit = self.runtime.cached_rollout(self.suite, problem, sample)
                    if hit is not None:  # the cache first: a rerun decides where it decided, sending nothing
                        results[label] = lambda hit=hit: hit
                    else:
                        in_flight[self._submit(k, label)] = (k, label)
                if len(results) == width:
                    self._finish(k, results)
                    self._advance()
                    continue
                pending[k] = results
            if not in_flight:
                if self.decider.stop is not None:
                    break
                lost = self.log.lost(self.next)
                if lost is not None:  # a worker died with it: no decision can pass it
                    self.log.append({**self._entry(self.next), "correct": None, "error": lost})
                    continue
                time.sleep(POLL_S)  # the others' draws the decision waits on
                continue
            # a future the engine cancelled stays CANCELLED, which cf.wait never counts as done
            done = {future for future in in_flight if future.cancelled()}
            if not done:
                done, _ = cf.wait(in_flight, timeout=POLL_S, return_when=cf.FIRST_COMPLETED)
            for future in done:
                k, label = in_flight.pop(future)
                pending[k][label] = future.result
                if future.cancelled():
                    dropped.add(k)
                if len(pending[k]) == width:
                    results = pending.pop(k)
                    if k in dropped:
                        self.runtime.engine.release([self._key(k, x) for x in self.labels])
                    else:
                        self._finish(k, results)
        self.finished = True

    def _key(self, k: int, label: str) -> tuple[str, str, str, int]:
        position, sample = self.plan[k]
        return (self.suite.name, self.copies[label][position].node_id, "draw", sample)

    def _submit(self, k: int, label: str) -> cf.Future[Any]:
        position, sample = self.plan[k]
        problem = self.copies[label][position]
        return self.runtime.engine.submit(
            self._key(k, label),
            functools.partial(self.runtime.counted_rollout, self.suite, problem, sample),
            (float(k), sample),
        )

    def _entry(self, k: int) -> dict[str, Any]:
        """What the schedule says of draw k: its problem, sample, seed and category."""
        from pytest_agenteval.api.records import sample_seed

        position, sample = self.plan[k]
        problem = self.problems[position]
        seed = sample_seed(self.runtime.settings.seed, problem.id, sample)
        category = self.suite.category_of(problem)
        return {
            "draw": k,
            "position": position,
            "problem": problem.id,
            "sample": sample,
            "seed": seed,
            "category": category,
        }

    def _finish(self, k: int, results: Mapping[str, Callable[[], Any]]) -> None:
        from pytest_agenteval.run.runtime import one_line

        entry = self._entry(k)
        position, sample, seed = entry["position"], entry["sample"], entry["seed"]
        verdicts: dict[str, bool | None] = {}
        generations: dict[str, Any] = {}
        try:
            for label in self.labels:
                problem = self.copies[label][position]
                rollout = results[label]()
                score = self.suite.score(problem, rollout, self.runtime.settings)
                # an item that cannot be scored (GAIA's without an answer) is no observation
                verdicts[label] = None if score.fields.get("scored") is False else bool(score.correct)
                generations[label] = GenerationRecord(sample, seed, rollout, score).to_dict()
        except BudgetExceeded as exc:
            entry.update(correct=None, error=one_line(exc), budget=True)
        except Exception as exc:  # noqa: BLE001 - the draw failed: the decision stops here
            entry.update(correct=None, error=one_line(exc))
            if isinstance(exc, FatalRequestError):
                self.runtime.fatal_error = str(exc)
        else:
            if self.labels == [""]:  # a one-model run: its verdict and generation
                entry.update(correct=verdicts[""], generation=generations[""])
            else:
                entry.update(correct=verdicts, generation=generations)
        self.runtime.engine.release([self._key(k, label) for label in self.labels])
        self.log.append(entry)

    def record(self, problem: Problem, nodeid: str) -> ProblemRecord | None:
        """The problem's record (of its model, in a sweep) over its draws in the decision (and
        the failed draw that stopped it, as its error), or None: the decision needed none of
        its draws."""
        position = self.positions[problem.id]
        label = problem.model if problem.model in self.labels else ""
        if self._drawn is None:  # the decision's draws by problem, once (not once an item)
            self._drawn = {}
            for k in range(self.decider.used):
                self._drawn.setdefault(self.plan[k][0], []).append(self.log.entries[k])
        used = self._drawn.get(position, [])
        error = None
        failed = self.log.entries.get(self.decider.used)
        # a failed draw errs its item; a refused one only when it was the first (no draw was
        # made: the item carries the budget's error, as a full run's stopped item does)
        refused_first = self.decider.stop == COST and self.decider.used == 0
        stopped_here = failed is not None and failed["position"] == position
        if (self.decider.stop == ERROR or refused_first) and stopped_here:
            error = f"draw {failed['draw']} (sample {failed['sample']}): {failed['error']}"
        if not used and error is None:
            return None
        fields = self.suite.score_fields

        def generation(entry: Mapping[str, Any]) -> Any:
            found = entry["generation"]
            return generation_from_dict(found[label] if label else found, fields)

        return self.runtime.record(
            self.suite,
            problem,
            nodeid,
            tuple(generation(e) for e in used),
            [error] if error else [],
            extra={"draws": [e["draw"] for e in used]},
        )
