# One concept, over 500 lines: sequential mode's pytest glue (checks, draws, decisions), one DrawLog
"""`--agenteval-sequential`'s pytest glue: the start-up refusals, the run's shared folder of
draws (made by the controller, named to the xdist workers), each item's record built from
its problem's draws (`run/sequential.py` draws them, in the first item of a suite each
process runs), and, on the controller, the gates decided by replaying the draws in order.

Each item is still one problem: its record holds the draws of it the decision used (a
problem drawn three times has three generations), and an item whose problem the decision
never drew is skipped with the reason, neither passed nor failed.

Paired sequences: in a sweep, a gate naming two models (`aime25[step-200].average_at_n >=
aime25[base].average_at_n + 0.02 @ 0.95`) runs on the differences of the two models' verdicts
on each draw, the same (problem, sample seed) for both; with `--agenteval-compare`, each
suite's comparison runs on this run's verdict minus the baseline's on the same (problem,
sample, seed), where the baseline's results file holds them (`baseline_draws`), and is
today's comparison at the end where it does not (one line says so at start-up)."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.api.records import Problem, ProblemRecord
from pytest_agenteval.api.suite import Suite
from pytest_agenteval.config.options import Settings
from pytest_agenteval.plugin.items import problem_of, suite_of
from pytest_agenteval.run.sequential import (
    BASELINE,
    BUDGET,
    COST,
    DECIDED,
    ERROR,
    PAIRED_END,
    Baseline,
    Decider,
    DrawLog,
    GateSpec,
    SuiteDraws,
    verdict,
)

STATE = pytest.StashKey["Sequential"]()
SWEEP_LABELS = pytest.StashKey[list[str]]()  # a sweep's model labels, in order (plugin/sweep.py sets them)
FOLDER_KEY = "agenteval_sequential"  # workerinput: the run's folder of draws
# the metrics that are a mean of single generations' verdicts (`<x>`: one path part)
DRAWN_METRICS = ("average_at_n", "accuracy", "per_category.<c>.accuracy", "per_level.<l>.accuracy")
DRAW_FIELDS = ("draw", "problem", "sample", "seed", "correct")
COMPARE_LEVEL = 0.95  # a sequential comparison's confidence without --agenteval-gate-confidence


def _refuse(problem: str) -> None:
    raise pytest.UsageError(f"--agenteval-sequential: {problem}")


def drawn_category(suite: str, metric: str) -> tuple[bool, str | None]:
    """(whether the draws decide `metric` of `suite`, the category its draws are limited to):
    Average@N and BFCL's and GAIA's accuracy over every draw, BFCL's per-category accuracy
    over the draws of that category, GAIA's per-level over those of that level."""
    parts = metric.split(".")
    if metric == "average_at_n" or (metric == "accuracy" and suite in ("bfcl", "gaia")):
        return True, None
    if suite == "bfcl" and len(parts) == 3 and parts[0] == "per_category" and parts[2] == "accuracy":
        return True, parts[1]
    if suite == "gaia" and len(parts) == 3 and parts[0] == "per_level" and parts[2] == "accuracy":
        return True, f"level{parts[1]}"
    return False, None


def _metric_refusal(gate: Any) -> str | None:
    expression, metric = gate.expression, gate.metric
    if gate.other is not None and gate.other.metric != metric:
        return (
            f"{expression!r}: a paired sequence subtracts one verdict from another on each draw; name "
            f"one metric on both sides, e.g. {gate.left} >= {gate.other.model}.{metric}"
        )
    if drawn_category(gate.suite, metric)[0]:
        return None
    if metric.split(".")[0] == "pass_at_k":
        return (
            f"{expression!r}: pass@k needs draws of k samples, which sequential mode does not make yet; "
            "gate average_at_n, or drop --agenteval-sequential for a full run"
        )
    if gate.suite == "datagen":
        return (
            f"{expression!r}: datagen's pass rates are not drawn sequentially yet; drop "
            "--agenteval-sequential for a full run"
        )
    return (
        f"{expression!r}: {metric} is not a mean of single draws; sequential gates decide average_at_n, "
        "BFCL's and GAIA's accuracy, per_category.C.accuracy (BFCL) and per_level.L.accuracy (GAIA) "
        "(drop --agenteval-sequential for a full run)"
    )


def check(config: pytest.Config, settings: Settings, gates: Sequence[Any], models: Sequence[str]) -> None:
    """One line at start-up for what sequential mode cannot decide or cannot share. `models`:
    a sweep's labels ([] : one model)."""
    if not gates and not settings.compare:
        _refuse(
            "it stops when every gate is decided: add one, e.g. "
            '--agenteval-gate "aime25.average_at_n >= 0.4 @ 0.95"'
        )
    for gate in gates:
        if models and not gate.labels:
            _refuse(
                f"{gate.expression!r} names no model: in a sweep each sequential gate names the models "
                f"it draws, e.g. {gate.suite}[{models[0]}].{gate.metric} ... (one gate a model)"
            )
        if gate.confidence is None:
            _refuse(
                f"{gate.expression!r} has no level: a sequential gate is decided by its interval; "
                f'write "{gate.expression} @ 0.95" or pass --agenteval-gate-confidence 0.95'
            )
        problem = _metric_refusal(gate)
        if problem is not None:
            _refuse(problem)
    named = {label for gate in gates for label in gate.labels}
    for label in models:
        if label not in named:
            _refuse(
                f"the sweep's model {label} is named by no gate, so nothing would stop its draws; "
                "gate it or drop its --model-path"
            )
    others = [
        ("--agenteval-shard", settings.shard),
        ("--batch", settings.batch),
        ("--bfcl-progressive", settings.bfcl_progressive is not None),
    ]
    for flag, value in others:
        if value:
            _refuse(f"{flag} decides what runs on its own; drop one of them")
    from pytest_agenteval.plugin import hosts

    hosts.refuse_remote_workers(
        config,
        "--agenteval-sequential: worker {tx} is on another machine; the draws are shared in a local folder",
    )


def wave_refusal(plan: Any, labels: set[str]) -> str | None:
    """Why a sweep's servers (a models.serve.sweep_plan.SweepPlan) cannot serve sequential
    draws, or None: every draw generates from each model a gate names, so their servers must
    all run at once; a server of a later wave starts only when an earlier one's items are
    done, and the first item waits for every model's generation."""
    needed = sorted({i for i, server in enumerate(plan.servers) if labels & set(server.labels)})
    if len(needed) <= plan.at_once:
        return None
    return (
        f"each draw generates from every model its gates name, whose {len(needed)} servers cannot "
        f"run at once ({plan.at_once} at a time: --serve-max-servers, or the GPUs of --serve-gpus / "
        "--serve-tp), so a later one would never start; give them the GPUs to run together, "
        "gate fewer models a run, or drop --agenteval-sequential"
    )


def baseline_draws(path: Path, run_seed: int) -> dict[str, dict[tuple[str, int], tuple[int, bool]]]:
    """Per suite, the verdicts a results file holds by (problem id, sample) with their seeds,
    those whose seed is this run's for that sample only (`--seed` the same): a sequential
    run's draws (its summary's `sequential.draws`, every finished draw) and any run's
    generations (a full run's: every sample of every problem)."""
    from pytest_agenteval.api.records import sample_seed
    from pytest_agenteval.datasets.jsonl import read_jsonl

    found: dict[str, dict[tuple[str, int], tuple[int, bool]]] = {}

    def take(suite: str, problem: Any, sample: Any, seed: Any, correct: Any) -> None:
        if correct is None or seed is None or sample is None:
            return
        if sample_seed(run_seed, problem, int(sample)) != seed:
            return  # another --seed, or a replayed run: not this run's sample
        found.setdefault(suite, {})[(str(problem), int(sample))] = (int(seed), bool(correct))

    for _, row in read_jsonl(path, lambda number, exc: ValueError(f"{path}:{number}: not valid JSON")):
        if row.get("type") == "problem":
            for g in row.get("generations") or ():
                take(row["suite"], row["problem_id"], g.get("sample_index"), g.get("seed"), g.get("correct"))
        elif row.get("type") == "summary" and isinstance(row.get("sequential"), Mapping):
            block = row["sequential"]
            fields = list(block.get("draw_fields") or DRAW_FIELDS)
            for values in block.get("draws") or ():
                draw = dict(zip(fields, values, strict=False))
                take(
                    row["suite"],
                    draw.get("problem"),
                    draw.get("sample"),
                    draw.get("seed"),
                    draw.get("correct"),
                )
    return found


def compare_spec(suite: str, settings: Settings) -> GateSpec:
    """The comparison with the baseline as a paired sequence: this run's verdict minus the
    baseline's >= -tolerance (PASS: no drop beyond the tolerance; FAIL: a drop beyond it)."""
    from pytest_agenteval.stats.paired import HEADLINE

    level = settings.gate_confidence or COMPARE_LEVEL
    metric = HEADLINE.get(suite, "average_at_n")
    margin = f" - {settings.compare_tolerance:g}" if settings.compare_tolerance else ""
    key = f"{suite}.{metric} >= baseline.{metric}{margin} @ {level:g}"
    return GateSpec(key, ">=", -settings.compare_tolerance, 1 - level, other=BASELINE)


def check_suites(settings: Settings, gates: Sequence[Any], suites: Mapping[str, Suite]) -> None:
    """After collection: a selected suite without a gate (or a comparison) has nothing to
    decide; a compared suite whose draws the baseline does not hold is said in one line."""
    if not settings.sequential:
        return
    gated = {gate.suite for gate in gates}
    for name in sorted(suites):
        if name not in gated and not settings.compare:
            _refuse(
                f"{name} is selected but has no gate, so nothing would stop its draws; gate it or deselect it"
            )
    if settings.compare:
        held = _baselines(settings)
        for name in sorted(suites):
            if not held.get(name) and name not in gated:  # no paired sequence and no gate: nothing decides
                _refuse(
                    f"--agenteval-compare {settings.compare} holds no draws of {name} with this run's "
                    f"seeds (--seed {settings.seed}) and no gate names {name}, so nothing would stop its "
                    "draws; rerun the baseline with this --seed, gate the suite, or drop "
                    "--agenteval-sequential for a full run"
                )
        for name in sorted(suites):
            if not held.get(name):
                sys.stderr.write(f"agenteval: {fallback_line(settings, name)}\n")


def fallback_line(settings: Settings, suite: str) -> str:
    return (
        f"--agenteval-compare {settings.compare} holds no draws of {suite} with this run's seeds "
        f"(--seed {settings.seed}): compared at the end by the paired bootstrap over the problems "
        "drawn, as without --agenteval-sequential"
    )


def install(config: pytest.Config, settings: Settings, gates: list[Any], sweep: bool) -> None:
    if not settings.sequential:
        return
    models = list(config.stash.get(SWEEP_LABELS, [])) if sweep else []
    if models and settings.gate_confidence is not None:  # the option's level reaches paired gates here
        gates[:] = [
            g if g.confidence is not None else replace(g, confidence=settings.gate_confidence) for g in gates
        ]
    check(config, settings, gates, models)
    if models:
        from pytest_agenteval.plugin.sweep_servers import SWEEP_SERVERS

        servers = config.stash.get(SWEEP_SERVERS, None)  # --serve: the sweep's launched servers
        if servers is not None:
            problem = wave_refusal(servers.plan, {label for g in gates for label in g.labels})
            if problem is not None:
                _refuse(problem)
    baselines = _baselines(settings) if settings.compare else {}
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        folder = Path(workerinput[FOLDER_KEY])
    else:
        folder = Path(tempfile.mkdtemp(prefix="agenteval-draws-"))
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
        if config.pluginmanager.hasplugin("xdist"):
            config.pluginmanager.register(_NameTheFolder(folder), "agenteval-sequential-xdist")
    config.stash[STATE] = Sequential(folder, gates, models, settings, baselines)


def _baselines(settings: Settings) -> dict[str, Baseline]:
    """The baseline's draws by suite (an unreadable file is the collector's usage error)."""
    path = Path(settings.compare).expanduser()
    try:
        return dict(baseline_draws(path, settings.seed))
    except (OSError, ValueError):
        return {}


class _NameTheFolder:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[FOLDER_KEY] = str(self.folder)


def specs(gates: Sequence[Any], suite: str, compare: GateSpec | None = None) -> list[GateSpec]:
    """The draws' sequences of a suite's gates (and of its comparison with the baseline)."""
    found = [
        GateSpec(
            g.expression,
            g.op,
            g.threshold,
            1 - g.confidence,
            label=g.label or "",
            other=g.other.label if g.other is not None else None,
            category=drawn_category(g.suite, g.metric)[1],
        )
        for g in gates
        if g.suite == suite and g.confidence is not None
    ]
    return found + ([compare] if compare is not None else [])


def drawn_labels(gates: Sequence[Any], suite: str, models: Sequence[str]) -> list[str]:
    """The models a suite's draws generate from, in the sweep's order ([""]: one model)."""
    if not models:
        return [""]
    named = {label for g in gates if g.suite == suite for label in g.labels}
    return [label for label in models if label in named]


class Sequential:
    """This process's sequential mode: the folder, the gates and each suite's draws."""

    def __init__(
        self,
        folder: Path,
        gates: Sequence[Any],
        models: Sequence[str] = (),
        settings: Settings | None = None,
        baselines: Mapping[str, Baseline] | None = None,
    ) -> None:
        self.folder = folder
        self.gates = list(gates)
        self.models = list(models)
        self.settings = settings
        self.baselines = dict(baselines or {})  # suite -> the baseline's draws (this run's seeds)
        self.suites: dict[str, SuiteDraws] = {}
        self.replays: dict[str, tuple[Decider, dict[str, Any], list[dict[str, Any]]]] = {}
        # the controller's pricing of a problem line (output.cost.price_record), for `spent`
        self.price: Price | None = None

    def compare_spec(self, suite: str) -> GateSpec | None:
        """The suite's comparison as a paired sequence, where the baseline holds its draws."""
        if self.settings is None or not self.settings.compare or not self.baselines.get(suite):
            return None
        return compare_spec(suite, self.settings)

    def _specs(self, suite: str) -> list[GateSpec]:
        return specs(self.gates, suite, self.compare_spec(suite))

    def evaluate(self, runtime: Any, suite: Suite, problem: Problem, item: pytest.Item) -> ProblemRecord:
        draws = self.suites.get(suite.name)
        if draws is None:
            labels = drawn_labels(self.gates, suite.name, self.models)
            by_label: dict[str, dict[Any, Problem]] = {}
            for other in item.session.items:
                found = suite_of(getattr(other, "module", None))
                p = problem_of(other)
                if found is not None and found.name == suite.name and p is not None:
                    by_label.setdefault(p.model, {}).setdefault(p.id, p)
            first = by_label.get(labels[0], {})
            # the problems every drawn model has an item of, in the first one's order
            population = [
                replace(p, model="")
                for pid, p in first.items()
                if all(pid in by_label.get(x, {}) for x in labels)
            ]
            baseline = self.baselines.get(suite.name) if self.compare_spec(suite.name) else None
            draws = self.suites[suite.name] = SuiteDraws(
                runtime, suite, population, self._specs(suite.name), self.folder, labels, baseline
            )
        draws.run(_limits(runtime, item.config))
        record = draws.record(problem, item.nodeid)
        if record is None:
            pytest.skip(f"not drawn: {_stopped(draws.decider, draws.budget)}")
        return record

    # -- on the controller, at the end -----------------------------------------------------
    def _replay(self, name: str) -> tuple[Decider, dict[str, Any], list[dict[str, Any]]]:
        if name not in self.replays:
            log = DrawLog(self.folder, name)
            log.refresh()
            plan = log.plan() or {"problems": 0, "samples": 0, "budget": 0}
            baseline = self.baselines.get(name) if self.compare_spec(name) else None
            decider = Decider(self._specs(name), plan["budget"], baseline).replay(_contiguous(log.entries))
            self.replays[name] = (decider, plan, log.ordered())
        return self.replays[name]

    def finish(self, gates: Sequence[Any], summaries: Sequence[dict[str, Any]]) -> list[Any]:
        """The gates' results, decided by replaying each suite's draws in order, and each
        summary's `sequential` block (the draws in order, the stop, the intervals)."""
        by_suite = {s["suite"]: s for s in summaries}
        names = dict.fromkeys([g.suite for g in gates] + [n for n in by_suite if self.compare_spec(n)])
        for name in names:
            decider, plan, entries = self._replay(name)
            summary = by_suite.get(name)
            if summary is not None:
                summary["sequential"] = _block(decider, plan, entries, price=self.price)
                summary["val_n"] = plan["samples"]  # the full run's N (problems hold their draws)
        return [_result(gate, self._replay(gate.suite), by_suite.get(gate.suite)) for gate in gates]

    def finish_sweep(
        self, gates: Sequence[Any], summaries: Mapping[tuple[str, str], dict[str, Any]]
    ) -> list[Any]:
        """A sweep's gates (each names its models), decided by replaying the suite's draws;
        each model's summary gets its own `sequential` block (its verdicts on the draws)."""
        for (name, label), summary in summaries.items():
            if any(g.suite == name for g in gates):
                decider, plan, entries = self._replay(name)
                summary["sequential"] = _block(decider, plan, entries, label, self.price)
                summary["val_n"] = plan["samples"]
        results = []
        for gate in gates:
            summary = summaries.get((gate.suite, str(gate.label)))
            if summary is not None and gate.other is not None:
                other = summaries.get((gate.suite, gate.other.label))
                if other is None or not other.get("complete", False):
                    summary = other  # fails closed on the other model's run
            results.append(_result(gate, self._replay(gate.suite), summary))
        return results

    def comparisons(self, by_suite: Mapping[str, Sequence[Any]]) -> list[Any]:
        """The suites' comparisons with the baseline: the paired sequence's verdict where the
        baseline holds the draws (a decided drop fails; undecided is no verdict, as a
        comparison too small to decide), else today's paired bootstrap (output/compare.py)."""
        from pytest_agenteval.output.compare import Comparison, compare, load_baseline

        assert self.settings is not None and self.settings.compare
        settings = self.settings
        found = []
        for name, records in sorted(by_suite.items()):
            spec = self.compare_spec(name)
            if spec is None:
                baseline = load_baseline(Path(settings.compare))
                found.append(compare(name, records, baseline, settings.compare_tolerance, settings.seed))
                continue
            decider, plan, entries = self._replay(name)
            sequence = decider.sequences[spec.key]
            decision = decider.decision(spec)
            used = entries[: decider.used]
            mine = [v for e in used if (v := verdict(e, "")) is not None]
            theirs = [
                decider.baseline[(str(e["problem"]), int(e["sample"]))][1]
                for e in used
                if (str(e["problem"]), int(e["sample"])) in decider.baseline
            ]
            interval = sequence.interval if sequence.n else None
            low, high = (interval.low, interval.high) if interval else (-1.0, 1.0)
            mean = sequence.mean or 0.0
            level = 1 - spec.alpha
            reason = (
                f"paired draws: {mean:+.4f} [{low:+.4f}, {high:+.4f}] at {level:g} over {sequence.n:,} draws "
                f"of the same (problem, sample) as the baseline, tolerance {settings.compare_tolerance:g}: "
                + {
                    "PASS": "no drop beyond the tolerance",
                    "FAIL": "a drop beyond the tolerance",
                    "UNDECIDED": f"undecided ({_stopped(decider, plan['budget'])})",
                }[decision]
            )
            found.append(
                Comparison(
                    name,
                    spec.key.split(" ")[0].split(".", 1)[1],
                    sequence.n,
                    round(sum(theirs) / len(theirs), 6) if theirs else 0.0,
                    round(sum(mine) / len(mine), 6) if mine else 0.0,
                    round(mean, 6),
                    (low, high),
                    decision != "FAIL",
                    reason,
                    decided=decision != "UNDECIDED",
                )
            )
        return found


def _limits(runtime: Any, config: pytest.Config) -> Callable[[], tuple[int, int]]:
    """Draws in flight at once: (in this process, in the whole run), asked before each
    claim. Its share of --concurrency per endpoint and the whole of it; under
    `--concurrency auto` the live limit of its endpoints (each process's, times the
    processes), never --concurrency-max: a draw waiting for a free request slot would be
    sent after the decision. For an in-process model the engine's queue in each process."""
    endpoints = len(runtime.choice.endpoints)
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    settings = runtime.settings
    if not endpoints:
        local = (runtime.engine.max_active, runtime.engine.max_active * workers)
        return lambda: local
    if settings.concurrency != "auto":
        fixed = (runtime.concurrency * endpoints, settings.concurrency_ceiling * endpoints)
        return lambda: fixed
    from pytest_agenteval.models.http.aimd import auto_start

    start = (auto_start("auto", runtime.concurrency, settings.concurrency_max) or 1) * endpoints

    def live() -> tuple[int, int]:
        # each started sampler's endpoints and their limits now (none before its first request)
        slots = sum(int(entry["final"]) for entry in runtime.concurrency_report()) or start
        return slots, slots * workers

    return live


def _contiguous(entries: Mapping[int, dict[str, Any]]) -> list[dict[str, Any]]:
    found, k = [], 0
    while k in entries:
        found.append(entries[k])
        k += 1
    return found


def _stopped(decider: Decider, budget: int) -> str:
    used = f"{decider.used:,} of {budget:,} draws"
    return {
        DECIDED: f"every gate was decided after {used}",
        BUDGET: f"the budget of {budget:,} draws was spent undecided",
        COST: f"the cost budget stopped the draws after {used}",
        ERROR: f"a draw failed after {used}: {decider.error}",
        PAIRED_END: f"the baseline holds no later draw of this run's schedule, after {used}",
    }.get(decider.stop or "", f"the draws stopped after {used}")


Price = Callable[[dict[str, Any], str], None]  # prices a problem line's generations of model `label`


def _block(
    decider: Decider,
    plan: Mapping[str, Any],
    entries: Sequence[Mapping[str, Any]],
    label: str = "",
    price: Price | None = None,
) -> dict[str, Any]:
    """The summary's `sequential` block; in a sweep, model `label`'s (its verdicts, the gates
    that name it)."""
    gates = [s for s in decider.gates if not label or label in (s.label, s.other)]
    return {
        "stop": decider.stop,
        "reason": _stopped(decider, plan["budget"]),
        "draws_used": decider.used,
        "draws_full": plan["budget"],
        "draws_finished": sum(1 for e in entries if not e.get("error")),  # the ones after the stop too
        "problems": plan["problems"],
        "gates": [
            {
                "gate": spec.key,
                "decision": decider.decision(spec),
                "mean": decider.sequences[spec.key].mean,
                "interval": _interval(decider, spec.key),
                "confidence": round(1 - spec.alpha, 12),
                "observations": decider.sequences[spec.key].n,
            }
            for spec in gates
        ],
        "draw_fields": list(DRAW_FIELDS),
        "draws": [[e["draw"], e["problem"], e["sample"], e["seed"], verdict(e, label)] for e in entries],
        "spent": _spent(entries, label, price),
    }


def _spent(entries: Sequence[Mapping[str, Any]], label: str, price: Price | None) -> dict[str, Any]:
    """What every finished draw cost (model `label`'s generations in a sweep), the draws
    after the decision included: the summary's requests, tokens and cost count only the
    draws the decision used (the problems' records)."""
    spent: dict[str, Any] = dict.fromkeys(
        ("draws", "attempts", "retries", "cached_generations", "prompt_tokens", "completion_tokens"), 0
    )
    usd: float | None = 0.0
    for entry in entries:
        found = entry.get("generation")
        if entry.get("error") or not isinstance(found, Mapping):
            continue
        generation = found if "sample_index" in found else found.get(label)
        if not isinstance(generation, Mapping):
            continue
        spent["draws"] += 1
        spent["attempts"] += int(generation.get("attempts") or 0)
        spent["retries"] += int(generation.get("retries") or 0)
        spent["cached_generations"] += bool(generation.get("cached"))
        spent["prompt_tokens"] += int(generation.get("prompt_tokens") or 0)
        spent["completion_tokens"] += int(generation.get("completion_tokens") or 0)
        priced = {"generations": [dict(generation)]}
        if price is not None:
            price(priced, label)
        cost = priced["generations"][0].get("cost_usd")
        usd = usd + cost if usd is not None and isinstance(cost, int | float) else None
    spent["usd"] = round(usd, 6) if usd is not None and price is not None else None
    return spent


def _interval(decider: Decider, key: str) -> list[float] | None:
    if decider.sequences[key].n == 0:
        return None
    found = decider.sequences[key].interval
    return [found.low, found.high]


def _result(gate: Any, replay: tuple[Decider, dict[str, Any], list[Any]], summary: Any) -> Any:
    from pytest_agenteval.output.gate import GateResult

    decider, plan, entries = replay
    spec = next(s for s in decider.gates if s.key == gate.expression)
    sequence = decider.sequences[spec.key]
    mean = sequence.mean
    found = GateResult(gate, False, mean, "", decision="FAIL", draws=decider.used, sequential=True)
    if decider.used == 0 and decider.stop == COST:  # the cost budget refused the very first draw
        return replace(
            found,
            reason=f"no draws: the cost budget refused the first one ({decider.error}); gates fail closed",
        )
    if summary is None or decider.used == 0 and decider.stop is None:
        return replace(found, reason=f"no draws of {gate.suite}: gates fail closed")
    if decider.stop == ERROR:
        return replace(found, reason=f"{_stopped(decider, plan['budget'])}: gates fail closed")
    if not summary.get("complete", False):
        why = summary.get("incomplete")
        return replace(found, reason=f"run incomplete{f' ({why})' if why else ''}: gates fail closed")
    decision = decider.decision(spec)
    interval = _interval(decider, spec.key)
    used, full = decider.used, plan["budget"]
    if decider.stop == DECIDED:
        tail = f"({1 - used / full:.0%} not needed)" if full else ""
    elif decision != "UNDECIDED":  # decided before the draws stopped for another reason
        tail = f"(decided; the draws ran on for the other gates: {_stopped(decider, full)})"
    elif decider.stop == COST:
        tail = "(the cost budget stopped the draws: undecided)"
    elif decider.stop == PAIRED_END:
        tail = "(the baseline holds no later draw of this run's schedule: undecided)"
    else:
        tail = "(the whole budget: undecided)"
    unit = "generations"
    paired: dict[str, Any] = {}
    if spec.other is not None:  # a sweep's paired gate: the differences of two models' verdicts
        unit = "paired draws"
        used_entries = [e for e in entries[:used] if not e.get("error")]
        both = [
            (verdict(e, spec.label), verdict(e, spec.other))
            for e in used_entries
            if spec.category is None or e.get("category") == spec.category
        ]
        both = [(a, b) for a, b in both if a is not None and b is not None]
        if both:
            left = sum(a for a, _ in both) / len(both)
            right = sum(b for _, b in both) / len(both)
            paired = {"value": left, "other_value": right, "delta": mean}
    if spec.category is not None:  # a category's draws among the suite's
        unit += f", {sequence.n:,} of them {spec.category}"
    elif sequence.n != used:  # draws of items that cannot be scored (GAIA without an answer)
        unit += f", {sequence.n:,} of them scored"
    if mean is not None and interval:
        sign = "+" if spec.other is not None else ""
        shown = f"{mean:{sign}.2f} [{interval[0]:{sign}.2f}, {interval[1]:{sign}.2f}]"
        if spec.other is not None:
            shown = f"{spec.label} - {spec.other} {shown}"
    else:
        shown = "n/a"
    reason = f"{shown} after {used:,} of {full:,} {unit} {tail}"
    return replace(
        found,
        passed=decision == "PASS",
        decision=decision,
        interval=(interval[0], interval[1]) if interval else None,
        reason=reason,
        **paired,
    )
