"""Win rate of generated problems against reference problems, judged in both orders.

A pair is one (generated item, reference opponent, judge) judged twice: generated in
slot A, then in slot B. Both valid and agreeing: that outcome. Both valid and
disagreeing: a tie, counted in `position_inconsistency_rate`. Invalid or failed in
either order: the pair is incomplete, excluded and counted (not a tie)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pytest_agenteval.stats.proportions import WILSON, clustered_proportion
from pytest_agenteval.tasks.datagen._stats import BOOTSTRAP_ITERATIONS, _ratio

OUTCOME_VALUE = {"win": 1.0, "tie": 0.5, "loss": 0.0}
EXTREME_CHANGE = 0.10  # AlpacaEval's warning when length control moves the rate this much
BIAS_BAND = (0.2, 0.8)  # first-position preference outside it: position bias


def game_outcome(judgment: Mapping[str, Any], generated_slot: str) -> str:
    winner = judgment["winner"]
    if winner == "tie":
        return "tie"
    return "win" if winner == generated_slot else "loss"


def pair_result(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """`first`: generated in slot A; `second`: generated in slot B."""
    if first.get("status") != "valid" or second.get("status") != "valid":
        return {"complete": False}
    one, two = game_outcome(first, "A"), game_outcome(second, "B")
    return {"complete": True, "consistent": one == two, "outcome": one if one == two else "tie"}


def _adjusted(results: Sequence[Mapping[str, Any]]) -> float | None:
    return _ratio(sum(OUTCOME_VALUE[r["outcome"]] for r in results), len(results))


def _per_judge(pairs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in sorted({p["judge"] for p in pairs}):
        games = [g for p in pairs if p["judge"] == name for g in (p["first"], p["second"])]
        valid = [g for g in games if g.get("status") == "valid"]
        decisive = [g for g in valid if g["winner"] in ("A", "B")]
        results = [pair_result(p["first"], p["second"]) for p in pairs if p["judge"] == name]
        complete = [r for r in results if r["complete"]]
        first_rate = _ratio(sum(g["winner"] == "A" for g in decisive), len(decisive))
        out[name] = {
            "games": len(games),
            "valid_games": len(valid),
            "first_position_rate": first_rate,
            "decisive_rate": _ratio(len(decisive), len(valid)),
            "consistency": _ratio(sum(r["consistent"] for r in complete), len(complete)),
            "position_bias": first_rate is not None and not BIAS_BAND[0] <= first_rate <= BIAS_BAND[1],
            "uninformative": bool(valid) and not decisive,  # only ever says A=B
        }
    return out


def _logistic_at_zero(x: np.ndarray, y: np.ndarray, ridge: float = 0.2) -> float:
    """AlpacaEval's minimal length-controlled GLM: y ~ b0 + b1 * tanh(x), fractional y
    (ties 0.5), ridge on b1; the prediction at zero length difference, sigmoid(b0)."""
    features = np.column_stack([np.ones_like(x), np.tanh(x)])
    beta = np.zeros(2)
    penalty = np.diag([0.0, ridge])
    for _ in range(100):
        p = 1 / (1 + np.exp(-features @ beta))
        weights = np.clip(p * (1 - p), 1e-9, None)
        gradient = features.T @ (y - p) - penalty @ beta
        hessian = features.T @ (features * weights[:, None]) + penalty + 1e-9 * np.eye(2)
        step = np.linalg.solve(hessian, gradient)
        beta = np.clip(beta + step, -30.0, 30.0)  # all wins (or losses): the intercept runs off
        if np.max(np.abs(step)) < 1e-10:
            break
    return float(1 / (1 + math.exp(-float(beta[0]))))


def length_control(
    pairs: Sequence[Mapping[str, Any]], results: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    done = [(p, r) for p, r in zip(pairs, results, strict=True) if r["complete"]]
    if not done:
        return {"lc_win_rate": None, "prefer_longer_rate": None}
    delta = np.array([p["generated_chars"] - p["reference_chars"] for p, _ in done], dtype=float)
    y = np.array([OUTCOME_VALUE[r["outcome"]] for _, r in done])
    std = float(np.std(delta))
    lc = float(np.mean(y)) if std == 0 else _logistic_at_zero(delta / std, y)
    decisive = [
        (d, r["outcome"]) for d, (_, r) in zip(delta, done, strict=True) if d != 0 and r["outcome"] != "tie"
    ]
    longer = sum((d > 0) == (outcome == "win") for d, outcome in decisive)
    return {
        "lc_win_rate": round(lc, 6),
        "prefer_longer_rate": _ratio(longer, len(decisive)),
        "mean_chars_generated": float(np.mean([p["generated_chars"] for p, _ in done])),
        "mean_chars_reference": float(np.mean([p["reference_chars"] for p, _ in done])),
    }


def _method(method: str) -> str:
    return "wilson" if method == WILSON else "cluster bootstrap over items, widened to wilson"


def winrate_summary(pairs: Sequence[Mapping[str, Any]], seed: int) -> dict[str, Any]:
    """`pairs`: {item, judge, opponent, first, second, generated_chars, reference_chars}."""
    results = [pair_result(p["first"], p["second"]) for p in pairs]
    complete = [r for r in results if r["complete"]]
    counts = {k: sum(r["outcome"] == k for r in complete) for k in ("win", "loss", "tie")}
    by_item: dict[Any, list[Mapping[str, Any]]] = defaultdict(list)
    for pair, result in zip(pairs, results, strict=True):
        if result["complete"]:
            by_item[pair["item"]].append(result)
    clusters = list(by_item.values())
    # proportions of pairs, clustered by item (several opponents or judges per item): the
    # cluster bootstrap widened to Wilson, never a point at 0 % or 100 %; Wilson alone when
    # every item has one pair. Ties count half in the adjusted rate.
    win_interval = clustered_proportion(
        [sum(r["outcome"] == "win" for r in g) for g in clusters],
        [len(g) for g in clusters],
        seed,
        BOOTSTRAP_ITERATIONS,
    )
    adjusted_interval = clustered_proportion(
        [sum(OUTCOME_VALUE[r["outcome"]] for r in g) for g in clusters],
        [len(g) for g in clusters],
        seed,
        BOOTSTRAP_ITERATIONS,
    )
    n = len(complete)
    summary: dict[str, Any] = {
        "pairs": len(pairs),
        "pairs_complete": n,
        "pairs_incomplete": len(pairs) - n,
        "wins": counts["win"],
        "losses": counts["loss"],
        "ties": counts["tie"],
        "win_rate": _ratio(counts["win"], n),
        "loss_rate": _ratio(counts["loss"], n),
        "tie_rate": _ratio(counts["tie"], n),
        "win_rate_ci95": win_interval.bounds(),
        "win_rate_ci_method": _method(win_interval.method),
        "adjusted_win_rate": _adjusted(complete),
        "adjusted_win_ci95": adjusted_interval.bounds(),
        "adjusted_win_ci_method": _method(adjusted_interval.method),
        "undefined_resamples": {
            "win_rate_ci95": win_interval.undefined,
            "adjusted_win_ci95": adjusted_interval.undefined,
        },
        "position_inconsistency_rate": _ratio(sum(not r["consistent"] for r in complete), n),
        "per_judge": _per_judge(pairs),
        **length_control(pairs, results),
    }
    raw, lc = summary["adjusted_win_rate"], summary["lc_win_rate"]
    summary["lc_extreme_change"] = raw is not None and lc is not None and abs(lc - raw) > EXTREME_CHANGE
    return summary
