"""The design documents' quality gates as presets, judged against their intervals, and the lines of
the terminal summary. A gate whose threshold lies inside the 95 % interval is reported
as undecided at this N (N = 30 gives +-18 points on a 50 % win rate)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_agenteval.tasks.datagen._stats import wilson

# (expression, section, metric, interval key, threshold): seed section 4.5 plus validity
PRESETS: tuple[tuple[str, str, str, str, float], ...] = (
    ("datagen.judge.mean_score >= 4.0", "judge", "mean_score", "mean_score_ci95", 4.0),
    ("datagen.winrate.win_rate >= 0.45", "winrate", "win_rate", "win_rate_ci95", 0.45),
    ("datagen.judge.pass_rate >= 0.8", "judge", "pass_rate", "pass_rate_ci95", 0.8),
    ("datagen.human.approved_rate >= 0.9", "human", "approved_rate", "approved_rate_ci95", 0.9),
    ("datagen.judge.valid_rate >= 0.98", "judge", "valid_rate", "", 0.98),
)


def decide(value: float | None, ci: Sequence[float] | None, threshold: float) -> str:
    if value is None:
        return "no data"
    if ci is None:
        return "pass" if value >= threshold else "fail"
    if ci[0] >= threshold:
        return "pass"
    if ci[1] < threshold:
        return "fail"
    return "undecided"


def gate_presets(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for expression, section, metric, ci_key, threshold in PRESETS:
        block = summary.get(section) or {}
        value = block.get(metric)
        ci = block.get(ci_key) if ci_key else None
        if metric == "valid_rate" and block.get("judgments"):
            ci = wilson(block["valid"], block["judgments"])
        verdict = decide(value, ci, threshold)
        entry = {"gate": expression, "value": value, "ci95": ci, "verdict": verdict}
        if verdict == "undecided":
            entry["warning"] = f"the 95 % interval {_ci(ci)} contains {threshold:g}: too few items to decide"
        out.append(entry)
    return out


def _f(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ci(ci: Sequence[float] | None) -> str:
    return "" if not ci else f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def _judge_rows(judge: Mapping[str, Any]) -> list[tuple[str, str]]:
    rows = [
        (
            "judge",
            f"mean {_f(judge.get('mean_score'))} {_ci(judge.get('mean_score_ci95'))}, pass "
            f"{_f(judge.get('pass_rate'))} {_ci(judge.get('pass_rate_ci95'))}, excellent "
            f"{_f(judge.get('excellent_rate'))} over {judge.get('items_scored', 0)} scored items",
        ),
        (
            "  valid_rate",
            f"{_f(judge.get('valid_rate'))} ({judge.get('valid', 0)}/{judge.get('judgments', 0)} verdicts; "
            f"{judge.get('invalid', 0)} invalid, {judge.get('errors', 0)} errors, never imputed)",
        ),
    ]
    for name, stats in (judge.get("per_judge") or {}).items():
        modes = ", ".join(f"{m} {c}" for m, c in stats.get("parse_modes", {}).items())
        rows.append(
            (f"  {name}", f"valid {_f(stats.get('valid_rate'))}, mean {_f(stats.get('mean_score'))}, {modes}")
        )
    return rows


def _winrate_rows(win: Mapping[str, Any]) -> list[tuple[str, str]]:
    if not win.get("pairs"):
        return []
    rows = [
        (
            "win rate",
            f"win {_f(win.get('win_rate'))} {_ci(win.get('win_rate_ci95'))} loss {_f(win.get('loss_rate'))} "
            f"tie {_f(win.get('tie_rate'))}; adjusted {_f(win.get('adjusted_win_rate'))} "
            f"{_ci(win.get('adjusted_win_ci95'))}; length-controlled {_f(win.get('lc_win_rate'))}",
        ),
        (
            "  pairs",
            f"{win.get('pairs_complete')} complete, {win.get('pairs_incomplete')} incomplete (excluded); "
            f"position inconsistency {_f(win.get('position_inconsistency_rate'))}",
        ),
    ]
    for name, stats in (win.get("per_judge") or {}).items():
        flag = "  POSITION BIAS" if stats.get("position_bias") else ""
        flag += "  UNINFORMATIVE (only ties)" if stats.get("uninformative") else ""
        rows.append(
            (
                f"  {name}",
                f"first-position preference {_f(stats.get('first_position_rate'))}, "
                f"consistency {_f(stats.get('consistency'))}{flag}",
            )
        )
    if win.get("lc_extreme_change"):
        rows.append(("  WARNING", "length control moves the win rate by more than 10 points"))
    return rows


def _panel_rows(panel: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    if not panel:
        return []
    alpha = panel["alpha"]
    parts = ", ".join(f"{dim} {_f(entry['alpha'], 3)}" for dim, entry in alpha.items())
    rows = [("panel alpha", parts)]
    for name in panel.get("flagged_judges", []):
        rows.append(("  FLAGGED judge", f"{name}: {'; '.join(panel['per_judge'][name]['reasons'])}"))
    return rows


def summary_rows(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    load = summary.get("load") or {}
    rows = [
        (
            "data",
            f"{load.get('loaded')} problems loaded, {len(load.get('load_errors', []))} unloadable lines, "
            f"{load.get('repaired_items')} items with LaTeX repairs",
        )
    ]
    rows += _judge_rows(summary.get("judge") or {})
    rows += _winrate_rows(summary.get("winrate") or {})
    rows += _panel_rows(summary.get("panel"))
    checks = summary.get("checks") or {}
    solve = checks.get("solve")
    rows.append(
        (
            "judge-free",
            f"answers 0-999 {_f(checks.get('answer_format_rate'))}, near-duplicates "
            f"{checks.get('near_duplicates', 0)}"
            + (f", solver agrees {_f(solve['answer_agreement_rate'])}" if solve else ""),
        )
    )
    human = summary.get("human")
    if human and "error" not in human:
        rows.append(
            (
                "human",
                f"approved {_f(human.get('approved_rate'))} {_ci(human.get('approved_rate_ci95'))} "
                f"of {human.get('verified')} verified ({len(human.get('stale', []))} stale)",
            )
        )
        for name, versus in (human.get("judges") or {}).items():
            rows.append(
                (
                    f"  vs {name}",
                    f"alpha (mean score) {_f(versus['alpha_mean'], 3)}, judge - human "
                    f"{versus['mean_offset']:+.2f} over {versus['items']} items",
                )
            )
    for preset in summary.get("gate_presets", []):
        rows.append(
            (
                "seed gate",
                f"{preset['gate']}: {_f(preset['value'])} {_ci(preset['ci95'])} {preset['verdict'].upper()}"
                + (" (too few items to decide)" if preset["verdict"] == "undecided" else ""),
            )
        )
    return rows
