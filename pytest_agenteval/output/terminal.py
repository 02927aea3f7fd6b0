"""The terminal summary: one block per suite, then the gates and the results path."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_agenteval.config.presets import preset_line
from pytest_agenteval.output.gate import GateResult
from pytest_agenteval.output.length import length_lines, thinking_row


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return "-" if value is None else str(value)


def _with_ci(summary: Mapping[str, Any], name: str) -> str:
    if summary.get(name) is None:  # nothing scored: no number, and why
        from pytest_agenteval.api.metrics import not_applicable  # numpy: at the end of a run only

        return not_applicable(summary)
    interval = (summary.get("ci95") or {}).get(name)
    value = _fmt(summary.get(name))
    return f"{value}  [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else value


def incomplete_line(summary: Mapping[str, Any]) -> str | None:
    """`INCOMPLETE: 2 of 30 problems errored, 1 missing`, for a run that is not complete."""
    if summary.get("complete", True):
        return None
    return f"INCOMPLETE: {summary.get('incomplete') or 'not every selected problem was scored'}"


def cache_lines(summaries: Sequence[Mapping[str, Any]]) -> list[str]:
    """The summary's first line while the generation cache is on: how much it served
    (a replay run reads its results file, never the cache)."""
    if not summaries or any(
        (s.get("config") or {}).get("no_cache") or (s.get("model") or {}).get("backend") == "replay"
        for s in summaries
    ):
        return []
    requests = [s.get("requests") or {} for s in summaries]
    cached = sum(r.get("cached_generations", 0) for r in requests)
    return [f"{cached} of {sum(r.get('generations', 0) for r in requests)} generations from the cache"]


def suite_block(summary: Mapping[str, Any], extra_rows: Sequence[tuple[str, str]]) -> list[str]:
    model = summary.get("model") or {}
    complete = "complete" if summary.get("complete") else "INCOMPLETE"
    errors = summary.get("errors") or {}
    rows: list[tuple[str, str]] = [
        ("model", str(model.get("display") or f"{model.get('name')} ({model.get('backend')})")),
        (
            "problems",
            f"{summary.get('problems')} scored, {errors.get('items', 0)} errored, "
            f"{len(summary.get('missing') or ())} missing ({complete})",
        ),
        ("generations", f"{summary.get('generations')} (N={summary.get('val_n')})"),
    ]
    drawn = summary.get("sequential") if isinstance(summary.get("sequential"), Mapping) else None
    if drawn is not None:  # --agenteval-sequential: a few draws a problem, not N of each
        rows[-1] = (
            "generations",
            f"{summary.get('generations')} drawn for the decision, of {drawn.get('draws_full', 0):,} "
            f"in a full run (N={summary.get('val_n')})",
        )
    if "average_at_n" in summary and drawn is not None:
        # the draws' mean; its anytime-valid interval is the gate's (a bootstrap over the
        # drawn problems would not be); per-problem figures need N samples of each problem
        verdicts = [row[4] for row in (drawn.get("draws") or ())[: drawn.get("draws_used", 0)]]
        scored = [v for v in verdicts if v is not None]
        mean = f"{sum(scored) / len(scored):.3f}" if scored else "n/a"
        why = "n/a (sequential: a problem has only the draws of it, not N samples)"
        rows += [
            ("average@N", f"{mean}  over {len(scored):,} draws (its interval: the gate's line)"),
            ("pass@N", why),
            ("maj@N", why),
            ("format", _with_ci(summary, "format_rate")),
            ("pass@k", why),
        ]
    elif "average_at_n" in summary:
        rows += [
            ("average@N", _with_ci(summary, "average_at_n")),
            ("pass@N", _with_ci(summary, "pass_at_n")),
            ("maj@N", _with_ci(summary, "maj_at_n")),
            ("format", _with_ci(summary, "format_rate")),
        ]
        curve = summary.get("pass_at_k") or {}
        if curve:
            rows.append(("pass@k", "  ".join(f"k={k} {v:.3f}" for k, v in curve.items())))
    if summary.get("preset"):  # --agenteval-preset: the protocol the numbers above follow
        rows.append(("preset", preset_line(summary["preset"])))
    rows += list(extra_rows)
    rows += thinking_row(summary)
    prefix = "sandbox_without_"
    without = [k[len(prefix) :] for k in summary.get("backend") or {} if k.startswith(prefix)]
    if without:  # --sandbox-level auto took less than its strongest set: say so, not only in the JSON
        rows.append(("sandbox level", f"auto, without {', '.join(without)}: unavailable (docs/sandbox.md)"))
    tokens = summary.get("tokens") or {}
    requests = summary.get("requests") or {}
    rows.append(("tokens", f"prompt {tokens.get('prompt', 0)}, completion {tokens.get('completion', 0)}"))
    rows.append(
        (
            "requests",
            f"{requests.get('attempts', 0)} sent, {requests.get('retries', 0)} "
            f"retries, {requests.get('cached_generations', 0)} cached"
            + (" (the draws the decision used)" if drawn is not None else ""),
        )
    )
    spent = drawn.get("spent") if drawn is not None else None
    if isinstance(spent, Mapping):  # every finished draw, those after the decision too: what was paid
        from pytest_agenteval.models.cost.prices import format_usd

        usd = f"; {format_usd(spent['usd'])}" if spent.get("usd") is not None else ""
        rows.append(
            (
                "all draws",
                f"{spent['draws']:,} finished ({drawn.get('draws_used', 0):,} used): {spent['attempts']:,} "
                f"sent, {spent['retries']:,} retries, {spent['cached_generations']:,} cached; prompt "
                f"{spent['prompt_tokens']:,}, completion {spent['completion_tokens']:,}{usd}",
            )
        )
    shared = " (the whole sweep's: its models run together)" if summary.get("model_label") else ""
    rows.append(("wall time", f"{summary.get('duration_s', 0):.1f} s{shared}"))
    width = max(len(label) for label, _ in rows)
    lines = [f"{summary.get('suite')}"]
    flag = incomplete_line(summary)
    if flag:  # first, not only in the problems row: the numbers below are not the model's score
        lines.append(f"  {flag}")
    lines += [f"  {line}" for line in length_lines(summary)]
    lines += [f"  {label:<{width}}  {value}" for label, value in rows]
    return lines


def gate_lines(results: Sequence[GateResult]) -> list[str]:
    """One line a gate; a gate decided by its point estimate alone says so (a level, `@ 0.95`
    or --agenteval-gate-confidence, decides by an interval). A sequential gate's line says
    its interval at the stop and the draws it took: `gate PASS aime25.average_at_n >= 0.4 @
    0.95: 0.62 [0.47, 0.75] after 212 of 1,920 generations (89% not needed)`."""
    return [
        f"gate {r.verdict} {r.gate.expression}: {r.reason}"
        if getattr(r, "sequential", False)
        else f"gate {r.verdict}  {r.gate.expression}  ({r.reason}{', a point comparison' if r.point else ''})"
        for r in results
    ]


def run_lines(
    summaries: Sequence[Mapping[str, Any]], gate_results: Sequence[GateResult], comparisons: Sequence[Any]
) -> list[str]:
    """The summary of a run (or a merge): the cache line, each suite's block, the gates and
    the baseline comparison."""
    from pytest_agenteval.tasks.registry import suite_by_name

    lines = cache_lines(summaries)
    for summary in summaries:
        lines += suite_block(summary, suite_by_name(summary["suite"]).summary_rows(summary))
    lines += gate_lines(gate_results)
    lines += [f"compare {c.verdict}  {c.suite}.{c.metric}  ({c.reason})" for c in comparisons]
    return lines
