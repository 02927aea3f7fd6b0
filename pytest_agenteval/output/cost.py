"""What a run cost: each generation's `cost_usd` (or `device_seconds`), written into its
results line as the controller receives it, and the summary's `cost` and `budget` blocks
(per suite, per model, per judge). Pure functions of the records, the options and the
model choice; the prices come from models/cost/prices.py (docs/cost.md)."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from pytest_agenteval.api.records import ProblemRecord, counted_usage
from pytest_agenteval.models.cost.prices import (
    BATCH_PRICE_RULE,
    USD_DIGITS,
    Price,
    billed_name,
    format_usd,
    load_prices,
    price_for,
)

BUDGET_ERROR = "BudgetExceeded"  # the type named in an item's error when the budget stopped it
DEVICE_SECONDS_HOW = (
    "wall time x devices: each generation's own latency x the devices; the summary's, the run's "
    "wall time (start to summary) x the devices, the same in each suite's summary of one run"
)


def device_count(settings: Any, choice: Any, processes: int = 1) -> int | None:
    """Devices a model the run itself runs holds: the GPUs of --serve-gpus (else
    --serve-tp) for a launched server; for an in-process model one per process that
    loads it (`processes`: the xdist workers of the run, 1 for one generation); None for
    a billed one."""
    if billed_name(choice) is not None or choice.kind in ("replay", "invalid"):
        return None
    if choice.served is not None:
        gpus = settings.serve_gpus
        if gpus:
            from pytest_agenteval.models.serve.commands import parse_gpus

            try:
                return len(parse_gpus(gpus))
            except ValueError:
                return int(settings.serve_tp)
        return int(settings.serve_tp)
    return max(1, processes)


def _cached_tokens(generation: Mapping[str, Any]) -> int:
    usage = generation.get("request_usage")
    if isinstance(usage, Mapping):
        return int(usage.get("cached_prompt_tokens") or 0)
    return int(generation.get("cached_prompt_tokens") or 0)


def _tokens_cost(price: Price | None, prompt: int, completion: int, cached: int = 0) -> float | None:
    return price.cost(prompt, completion, cached) if price is not None else None


def price_generation(
    generation: MutableMapping[str, Any],
    prices: Mapping[str, Price],
    run_name: str | None,
    devices: int | None,
) -> None:
    """Add `cost_usd` (billed models; None without a price) or `device_seconds` (models the
    run runs) to one generation's results line; a datagen item's judge calls each get
    their own `cost_usd`, priced by the judge's model, and the generation their sum."""
    judgments = generation.get("judgments")
    if isinstance(judgments, list):
        costs = []
        for judgment in judgments:
            name = judgment.get("model") or run_name
            price = price_for(prices, name)
            if name:
                judgment["cost_usd"] = _tokens_cost(
                    price,
                    int(judgment.get("prompt_tokens") or 0),
                    int(judgment.get("completion_tokens") or 0),
                )
                costs.append(judgment["cost_usd"])
        solve = generation.get("solve")
        if isinstance(solve, Mapping) and run_name:
            tokens = (int(solve.get("prompt_tokens") or 0), int(solve.get("completion_tokens") or 0))
            costs.append(_tokens_cost(price_for(prices, run_name), *tokens))
        if costs:
            known = None not in costs
            generation["cost_usd"] = round(sum(c for c in costs if c), USD_DIGITS) if known else None
    elif run_name is not None:
        prompt, completion = counted_usage(
            int(generation.get("prompt_tokens") or 0), generation.get("completion_tokens"), generation
        )
        price = price_for(prices, run_name, generation.get("reply_model"))
        if price is not None and generation.get("batch_id"):  # a batch answered it (this run's or cached)
            price = price.batch_price()
        generation["cost_usd"] = _tokens_cost(price, prompt, completion, _cached_tokens(generation))
    if devices is not None and "cost_usd" not in generation:
        generation["device_seconds"] = round(float(generation.get("latency_s") or 0.0) * devices, 3)


def price_record(data: MutableMapping[str, Any], settings: Any, choice: Any) -> None:
    """Price every generation of one problem line (in place), as the controller gets it."""
    prices = load_prices(settings.prices)
    run_name, devices = billed_name(choice), device_count(settings, choice)
    for generation in data.get("generations", ()):
        price_generation(generation, prices, run_name, devices)


def _add(entry: dict[str, Any], prompt: int, completion: int, cached: int, usd: float | None) -> None:
    entry["prompt_tokens"] += prompt
    entry["completion_tokens"] += completion
    entry["cached_prompt_tokens"] += cached
    if usd is None:
        entry["unpriced"] += 1
    else:
        entry["usd"] = round(entry["usd"] + usd, USD_DIGITS)


def _entry(**fields: Any) -> dict[str, Any]:
    return {
        **fields,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cached_prompt_tokens": 0,
        "usd": 0.0,
        "unpriced": 0,
    }


def cost_summary(
    records: Sequence[ProblemRecord],
    settings: Any,
    billed_as: str | None,
    devices: int | None,
    duration_s: float,
    ledger: Any = None,
    prices: Mapping[str, Price] | None = None,
) -> dict[str, Any]:
    """The summary's `cost` block (and `budget`, under a budget): USD in all, the part
    served from the generation cache (paid by an earlier run, not this one), by model
    and by judge; device seconds for the models the run runs itself. `prices`: the ones
    listed (default: the run's, --prices over the defaults)."""
    prices = load_prices(settings.prices) if prices is None else prices
    run_name = billed_as  # models/cost/prices.billed_name of the run's model; None: device time
    by_model: dict[str, dict[str, Any]] = {}
    by_judge: dict[str, dict[str, Any]] = {}
    usd = cached_usd = batched_usd = 0.0
    batched = priced = 0
    for record in records:
        for generation in record.generations:
            rollout = generation.rollout
            extra = rollout.extra
            cost = extra.get("cost_usd")
            batched += extra.get("via") == "batch"
            if isinstance(cost, int | float):
                priced += 1
                usd += cost
                cached_usd += cost if rollout.cached else 0.0
                batched_usd += cost if extra.get("via") == "batch" else 0.0
            for judgment in extra.get("judgments") or ():
                name = judgment.get("model") or run_name or str(judgment.get("judge"))
                judge = by_judge.setdefault(str(judgment.get("judge")), _entry(model=name, calls=0))
                judge["calls"] += int(judgment.get("asks") or 0)
                tokens = (
                    int(judgment.get("prompt_tokens") or 0),
                    int(judgment.get("completion_tokens") or 0),
                )
                _add(judge, *tokens, 0, judgment.get("cost_usd"))
                _add(by_model.setdefault(name, _entry(generations=0)), *tokens, 0, judgment.get("cost_usd"))
            if "judgments" in extra or run_name is None:
                continue
            prompt, completion = counted_usage(rollout.prompt_tokens, rollout.completion_tokens, extra)
            name = run_name
            model = by_model.setdefault(name, _entry(generations=0))
            model["generations"] += 1
            _add(
                model,
                prompt,
                completion,
                _cached_tokens(extra),
                cost if isinstance(cost, int | float) else None,
            )
    dollars = bool(by_model) and bool(priced)  # null where nothing had a price (docs/cost.md)
    block: dict[str, Any] = {
        "billed_as": run_name,  # the price's name; a merge reads it back (merged_cost)
        "usd": round(usd, USD_DIGITS) if dollars else None,
        "usd_from_cache": round(cached_usd, USD_DIGITS) if dollars else None,
        # generations this run's --batch answered: paid by this run, at the batch price
        "batched_generations": batched,
        "usd_batched": round(batched_usd, USD_DIGITS) if dollars else None,
        "by_model": by_model,
        "by_judge": by_judge,
        "prices": {name: prices[name].as_dict() for name in by_model if name in prices},
    }
    if batched:
        block["batch_price_rule"] = BATCH_PRICE_RULE
    if devices is not None:
        block.update(
            devices=devices,
            device_seconds=round(duration_s * devices, 3),
            generation_device_seconds=round(
                sum(g.rollout.extra.get("device_seconds") or 0.0 for r in records for g in r.generations), 3
            ),
            device_seconds_how=DEVICE_SECONDS_HOW,
        )
    summary: dict[str, Any] = {"cost": block}
    if ledger is not None:
        summary["budget"] = budget_block(records, ledger)
    return summary


def budget_block(records: Sequence[ProblemRecord], ledger: Any) -> dict[str, Any]:
    """The run's budget, what it spent (every process, judges included) and the items the
    budget stopped (errors whose cause is `budget`)."""
    state = ledger.run_state()  # this run's own (a shard's share of a --budget-ledger)
    stopped = [r.problem_id for r in records if r.error and BUDGET_ERROR in r.error]
    block = {
        "max_cost_usd": ledger.limits.max_cost_usd,
        "max_total_tokens": ledger.limits.max_total_tokens,
        "spent_usd": state.spent_usd,
        "spent_tokens": state.spent_tokens,
        "requests": state.requests,
        "refused_requests": state.refused,
        "stopped": bool(stopped),
        "stopped_problem_ids": stopped,
        # how the prompts were reserved (models/cost/prompt_bound.py): requests by method
        "prompt_reservation": dict(state.reservations),
    }
    if getattr(ledger, "shared_path", None):  # --budget-ledger: what every run on it spent
        total = ledger.state()
        block["ledger"] = {
            "path": str(ledger.shared_path),
            "spent_usd": total.spent_usd,
            "spent_tokens": total.spent_tokens,
        }
    return block


def budget_line(summaries: Sequence[Mapping[str, Any]]) -> str | None:
    """`budget: stopped after $X of $Y; N items not run` when the budget stopped the run."""
    blocks = [s["budget"] for s in summaries if s.get("budget")]
    if not blocks or not any(b["stopped"] for b in blocks):
        return None
    first = blocks[0]
    items = sum(len(b["stopped_problem_ids"]) for b in blocks)
    shared = first.get("ledger") if isinstance(first.get("ledger"), Mapping) else None
    total = shared or first  # --budget-ledger: what every shard on it spent, against the one budget
    if first["max_cost_usd"] is not None:
        spent = f"{format_usd(total['spent_usd'])} of {format_usd(first['max_cost_usd'])}"
        own = format_usd(first["spent_usd"])
        flag = "--max-cost"
    else:
        spent = f"{total['spent_tokens']} of {first['max_total_tokens']} tokens"
        own = f"{first['spent_tokens']} tokens"
        flag = "--max-total-tokens"
    if shared is not None:
        spent += f" (all shards on --budget-ledger {shared['path']}; this one {own})"
    return f"budget: stopped after {spent}; {items} items not run; raise {flag} to go on"


def format_duration(seconds: float) -> str:
    """`0.4 s`, `32 s`, `4 m 49 s`, `3 h 26 m`: a duration a reader takes in at a glance."""
    if seconds < 9.95:
        return f"{round(seconds, 1):g} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} m {whole % 60} s"
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60} m"


def _devices(count: int) -> str:
    return "on 1 device" if count == 1 else f"across {count} devices"


def cost_lines(summaries: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line a suite: its cost in USD (and from the cache), `n/a` without a price, or
    its device time."""
    lines = []
    for summary in summaries:
        block = summary.get("cost") or {}
        parts = []
        unpriced = [n for n, m in (block.get("by_model") or {}).items() if m.get("unpriced")]
        missing = f"(no price for {', '.join(unpriced)}: --prices FILE)"
        if block.get("usd") is not None:
            parts.append(format_usd(block["usd"]) + (f" + n/a {missing}" if unpriced else ""))
            if block.get("usd_batched"):
                parts.append(
                    f"{format_usd(block['usd_batched'])} of it through this run's batch (batch price)"
                )
            if block.get("usd_from_cache"):
                parts.append(f"{format_usd(block['usd_from_cache'])} of it from the cache (not paid again)")
        elif unpriced:
            parts.append(f"n/a {missing}")
        if block.get("device_seconds") is not None:
            devices = int(block.get("devices") or 1)
            took = format_duration(float(summary.get("duration_s") or block["device_seconds"] / devices))
            if summary.get("model_label"):
                # a sweep's models share the run's wall time: each model's own is its generations'
                own = format_duration(float(block.get("generation_device_seconds") or 0.0))
                parts.append(
                    f"device time {own} generating {_devices(devices)} (its requests' latencies added up, "
                    f"overlapping; the sweep took {took}, shared by its models)"
                )
            else:
                parts.append(
                    f"device time {format_duration(block['device_seconds'])} {_devices(devices)} "
                    f"(the run took {took})"
                )
        for name, judge in sorted((block.get("by_judge") or {}).items()):
            if judge.get("unpriced") == 0 and judge.get("calls"):
                parts.append(f"judge {name}: {format_usd(judge['usd'])}")
        if parts:
            model = f"[{summary['model_label']}]" if summary.get("model_label") else ""  # a sweep's
            lines.append(f"cost {summary['suite']}{model}: " + "; ".join(parts))
    return lines


def merged_cost(
    records: Sequence[ProblemRecord],
    settings: Any,
    shard_summaries: Sequence[Mapping[str, Any]],
    duration_s: float,
) -> dict[str, Any]:
    """A merge's `cost` block: the same computation over the merged records, billed by the
    name the shards recorded, device seconds over the shards' summed wall time. Each
    shard's `budget` stays in its own file (a budget bounds one run). The prices listed
    are the ones the shards recorded: the merge may run where their --prices file is not."""
    blocks = [s["cost"] for s in shard_summaries if isinstance(s.get("cost"), Mapping)]
    if not blocks:
        return {}
    head = blocks[0]
    prices = {
        name: Price(model=name, **entry)
        for block in blocks
        for name, entry in (block.get("prices") or {}).items()
    }
    return cost_summary(
        records, settings, head.get("billed_as"), head.get("devices"), duration_s, prices=prices
    )
