"""pytest glue of cost and budgets (docs/cost.md): the start-up checks of --prices and
--max-cost, the budget ledger every process of the run shares (made on the controller,
named to xdist workers through workerinput), the cost and budget lines of the terminal
summary, and --estimate (run a sample of each suite's selection, project the rest)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.api.records import counted_usage, problem_from_dict
from pytest_agenteval.models.cost.budget import BudgetLedger, LedgerError, Limits, RunBudget, lease_for
from pytest_agenteval.models.cost.prices import PriceError, billed_name, format_usd, load_prices
from pytest_agenteval.plugin import hosts
from pytest_agenteval.plugin.items import suite_of

LEDGER_KEY = "agenteval_budget_ledger"  # workerinput: the ledger file's path
RUN_KEY = "agenteval_budget_run"  # workerinput: this run's id in the ledger (its own share)
SELECTION_KEY = "agenteval_estimate_selection"  # workeroutput: items selected per suite
# The ledger is a file on this machine: a worker on another one could not share it.
LEDGER_REFUSAL = (
    "--max-cost/--max-total-tokens: the budget's ledger is a file on this machine, which the "
    "remote worker --tx {tx} cannot share; run a budgeted run's workers on one machine"
)


# --batch with a budget: the whole conflict, before any missing price (one round trip)
BATCH_REFUSAL = (
    "--batch sends its requests outside the budget ledger, so --max-cost and --max-total-tokens "
    "would not bound them: drop the budget (or --batch)"
)
SHARD_REFUSAL = (
    "{flag} with --agenteval-shard: each shard would keep its own ledger, so N shards could spend N x "
    "{flag}; give every shard --budget-ledger FILE on storage they all see (one budget), or "
    "--budget-per-shard (each shard's own)"
)


def _budget_flags(settings: Any) -> list[str]:
    return [
        flag
        for flag, value in (
            ("--max-cost", settings.max_cost),
            ("--max-total-tokens", settings.max_total_tokens),
        )
        if value is not None
    ]


def check_settings(settings: Any) -> None:
    """The cost options' own values, and the prices file: one line each (exit 4)."""
    if settings.max_cost is not None and not settings.max_cost > 0:
        raise pytest.UsageError(f"--max-cost must be > 0 USD, got {format_usd(settings.max_cost)}")
    if settings.max_total_tokens is not None and settings.max_total_tokens < 1:
        raise pytest.UsageError(f"--max-total-tokens must be >= 1, got {settings.max_total_tokens}")
    if settings.estimate_sample < 1:
        raise pytest.UsageError(f"--estimate-sample must be >= 1, got {settings.estimate_sample}")
    flags = _budget_flags(settings)
    if settings.batch and flags:
        raise pytest.UsageError(BATCH_REFUSAL)
    if settings.budget_ledger and not flags:
        raise pytest.UsageError(
            f"--budget-ledger {settings.budget_ledger}: no budget to draw on; add --max-cost USD or "
            "--max-total-tokens N (or drop --budget-ledger)"
        )
    if settings.budget_ledger and settings.budget_per_shard:
        raise pytest.UsageError(
            "--budget-ledger makes the shards share one budget, --budget-per-shard gives each its own: "
            "drop one"
        )
    if settings.shard and flags and not settings.budget_ledger and not settings.budget_per_shard:
        raise pytest.UsageError(SHARD_REFUSAL.format(flag=" and ".join(flags)))
    try:
        load_prices(settings.prices)
    except PriceError as exc:
        raise pytest.UsageError(str(exc)) from None
    check_priced(settings)  # the judges' prices, before a launch that may take minutes


def check_priced(settings: Any, choice: Any = None) -> None:
    """--max-cost needs a price for every model billed in dollars: the judges' (checked
    before a launch) and, once `choice` is known, the run's model (a model the run runs
    itself costs device time, not dollars)."""
    if settings.max_cost is None:
        return
    prices = load_prices(settings.prices)
    names: list[tuple[str, str]] = []
    if settings.judge_endpoints:
        names.extend((name, "--judge-model") for name in settings.judge_models or ("default",))
    run_name = billed_name(choice) if choice is not None else None
    if run_name is not None:
        if choice.kind != "openai":
            names.append((run_name, "--base-model"))
        elif settings.model_name is None and choice.endpoints and run_name != "default":
            # the name came from the server: say so, a --model-name the user never gave is no help
            names.append(
                (run_name, f"the name {choice.endpoints[0]}/models lists; --model-name NAME picks another")
            )
        else:
            names.append((run_name, "--model-name"))
    for name, flag in names:
        if name in prices:
            continue
        if name == "default":
            raise pytest.UsageError(
                f"--max-cost {format_usd(settings.max_cost)}: the endpoint's model has no name to price it "
                f"by; give {flag} NAME and its price in a --prices FILE "
                '([models."NAME"] input = ..., output = ...)'
            )
        raise pytest.UsageError(
            f"--max-cost {format_usd(settings.max_cost)}: no price for the model {name!r} ({flag}); add "
            f'[models."{name}"] with input and output (USD per 1M tokens) to a --prices FILE (docs/cost.md)'
        )


def install(config: pytest.Config, settings: Any, choice: Any, runtime: Any, evaluating: bool) -> None:
    """Called from pytest_configure (after `check_settings`), on the controller and on
    every worker."""
    limits = Limits(settings.max_cost, settings.max_total_tokens)
    lease = lease_for(settings.request_timeout)  # another machine's reservation: its crash's time-out
    worker = hasattr(config, "workerinput")
    if worker:
        path = config.workerinput.get(LEDGER_KEY)  # type: ignore[attr-defined]
        if path:
            run = config.workerinput.get(RUN_KEY, "")  # type: ignore[attr-defined]
            ledger = BudgetLedger(Path(path), limits, run, lease)
            config.add_cleanup(ledger.close)
            runtime.budget = RunBudget(ledger, load_prices(settings.prices))
        if settings.estimate:
            config.pluginmanager.register(EstimateSampler(settings), "agenteval-estimate-sampler")
        return
    if not evaluating:
        return
    check_priced(settings, choice)
    ledger = None
    if limits.any and not config.option.collectonly:
        hosts.refuse_remote_workers(config, LEDGER_REFUSAL)
        if settings.budget_ledger:  # the shards' one budget: kept, with what they spent
            # resolved here: the workers, the summary and the merge name one file, wherever
            # each shard started
            path = Path(settings.budget_ledger).expanduser().resolve()
            try:
                ledger = BudgetLedger.shared(path, limits, uuid.uuid4().hex, lease)
            except LedgerError as exc:
                raise pytest.UsageError(str(exc)) from None
            config.add_cleanup(ledger.close)
        else:
            ledger = BudgetLedger.create(limits, lease_s=lease)
            config.add_cleanup(ledger.remove)
        runtime.budget = RunBudget(ledger, load_prices(settings.prices))
    collector = config.pluginmanager.get_plugin("agenteval-results")
    if collector is not None:
        collector.budget = ledger
    if settings.estimate:
        config.pluginmanager.register(EstimateSampler(settings), "agenteval-estimate-sampler")
    config.pluginmanager.register(CostReport(settings, ledger), "agenteval-cost")


def sample_positions(count: int, sample: int) -> list[int]:
    """`sample` positions evenly spread over `count` items (the middle of each of `sample`
    equal stretches), all of them when there are no more than `sample`."""
    if count <= sample:
        return list(range(count))
    return [int((i + 0.5) * count / sample) for i in range(sample)]


class EstimateSampler:
    """--estimate on the process that collects: keep a sample of each suite's selected
    items (after -k, -m, --limit) and remember how many were selected."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings
        self.selected: dict[str, int] = {}

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> Iterator[None]:
        yield  # after every other plugin's selection (--limit is trylast)
        by_suite: dict[str, list[pytest.Item]] = {}
        for item in items:
            suite = suite_of(getattr(item, "module", None))
            if suite is not None:
                by_suite.setdefault(suite.name, []).append(item)
        self.selected = {name: len(found) for name, found in by_suite.items()}
        dropped = []
        for found in by_suite.values():
            keep = set(sample_positions(len(found), self.settings.estimate_sample))
            dropped.extend(item for i, item in enumerate(found) if i not in keep)
        if dropped:
            gone = set(map(id, dropped))
            config.hook.pytest_deselected(items=dropped)
            items[:] = [item for item in items if id(item) not in gone]
        if hasattr(config, "workeroutput"):
            config.workeroutput[SELECTION_KEY] = self.selected  # type: ignore[attr-defined]


class CostReport:
    """On the controller: the selection counts of --estimate, the cost and budget lines,
    and --estimate's exit status."""

    def __init__(self, settings: Any, ledger: BudgetLedger | None) -> None:
        self.settings = settings
        self.ledger = ledger
        self.selected: dict[str, int] = {}

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        if self.ledger is not None:
            node.workerinput[LEDGER_KEY] = str(self.ledger.path)
            node.workerinput[RUN_KEY] = self.ledger.run

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        selected = getattr(node, "workeroutput", {}).get(SELECTION_KEY)
        if selected and not self.selected:
            self.selected = dict(selected)

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Iterator[None]:
        result = yield
        if self.settings.estimate and session.exitstatus in (
            pytest.ExitCode.OK,
            pytest.ExitCode.TESTS_FAILED,
        ):
            # a projection, not a verdict: 0 where every suite's selection was projected,
            # 1 where a suite's sample items all errored (nothing to project from)
            projected = not unprojected(self._collector(session.config), self._selected(session.config))
            session.exitstatus = pytest.ExitCode.OK if projected else pytest.ExitCode.TESTS_FAILED
        return result

    def _collector(self, config: pytest.Config) -> Any:
        return config.pluginmanager.get_plugin("agenteval-results")

    def _selected(self, config: pytest.Config) -> Mapping[str, int]:
        """Items selected per suite (before the sample), from a worker or this process."""
        sampler = config.pluginmanager.get_plugin("agenteval-estimate-sampler")
        return self.selected or (sampler.selected if sampler is not None else {})

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        from pytest_agenteval.output.cost import budget_line, cost_lines

        collector = config.pluginmanager.get_plugin("agenteval-results")
        summaries = collector.summaries if collector is not None else []
        for line in cost_lines(summaries):
            terminalreporter.write_line(line)
        line = budget_line(summaries)
        if line:
            terminalreporter.write_line(line, red=True, bold=True)
        if self.settings.estimate and collector is not None:
            for line in estimate_lines(collector, self._selected(config)):
                terminalreporter.write_line(line, bold=True)


def _items_per_suite(collector: Any) -> dict[str, list[dict[str, Any]]]:
    from pytest_agenteval.output.summary import unpack_record

    per_suite: dict[str, list[dict[str, Any]]] = {}
    for packed in collector.records.values() if collector is not None else ():
        data = unpack_record(packed)
        per_suite.setdefault(data["suite"], []).append(data)
    return per_suite


def estimate_lines(collector: Any, selected: Mapping[str, int]) -> list[str]:
    """The projection of each suite's selection from the items run (docs/cost.md)."""
    per_suite = _items_per_suite(collector)
    return [project(suite, per_suite.get(suite, []), total) for suite, total in sorted(selected.items())]


def unprojected(collector: Any, selected: Mapping[str, int]) -> list[str]:
    """The suites with items selected and no finished sample item to project them from."""
    per_suite = _items_per_suite(collector)
    return [
        suite
        for suite, total in sorted(selected.items())
        if total and not any(data.get("complete") for data in per_suite.get(suite, []))
    ]


def item_usage(data: Mapping[str, Any]) -> tuple[int, int, float | None, bool]:
    """(prompt, completion tokens, USD or None, served wholly from the cache) of one item."""
    record = problem_from_dict(data)
    prompt = completion = 0
    usd: float | None = 0.0
    for generation in record.generations:
        p, c = counted_usage(
            generation.rollout.prompt_tokens, generation.rollout.completion_tokens, generation.rollout.extra
        )
        prompt, completion = prompt + p, completion + c
        cost = generation.rollout.extra.get("cost_usd")
        usd = usd + cost if usd is not None and isinstance(cost, int | float) else None
    cached = bool(record.generations) and all(g.rollout.cached for g in record.generations)
    return prompt, completion, usd, cached


def project(suite: str, items: Sequence[Mapping[str, Any]], total: int) -> str:
    """One suite's projection: the mean per finished sample item, times the items selected."""
    finished = [data for data in items if data.get("complete")]
    if not finished:
        return (
            f"estimate {suite}: none of the {len(items)} sample items finished: {total} items not projected"
        )
    usages = [item_usage(data) for data in finished]
    mean_prompt = sum(u[0] for u in usages) / len(usages)
    mean_completion = sum(u[1] for u in usages) / len(usages)
    costs = [u[2] for u in usages]
    cost = (
        format_usd(sum(costs) / len(costs) * total)
        if all(c is not None for c in costs)
        else "no USD (no price)"
    )
    cached = sum(u[3] for u in usages)
    prompt, completion = round(mean_prompt * total), round(mean_completion * total)
    return (
        f"estimate {suite}: {prompt} prompt + {completion} completion tokens, {cost}, for all {total} "
        f"selected items (the mean of {len(finished)} sample items, "
        f"{cached} of them from the cache, x {total})"
    )
