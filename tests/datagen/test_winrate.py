"""Both-order win rate with exact expected values: inconsistent pairs are ties and
counted, pairs invalid in either order are excluded and counted."""

from __future__ import annotations

import pytest

from pytest_agenteval.tasks.datagen import pair_result, wilson, winrate_summary

LABEL_WINNER = {"A>>B": "A", "A>B": "A", "A=B": "tie", "B>A": "B", "B>>A": "B"}


def game(label: str | None) -> dict:
    if label is None:
        return {"status": "invalid", "error": "no JSON object in the reply"}
    return {"status": "valid", "verdict": label, "winner": LABEL_WINNER[label]}


def pair(item: str, first: str | None, second: str | None, judge: str = "j", gen: int = 100, ref: int = 100):
    return {
        "item": item,
        "judge": judge,
        "opponent": "r1",
        "first": game(first),  # generated in slot A
        "second": game(second),  # generated in slot B
        "generated_chars": gen,
        "reference_chars": ref,
    }


@pytest.mark.parametrize(
    ("first", "second", "result"),
    [
        ("A>B", "B>A", {"complete": True, "consistent": True, "outcome": "win"}),
        ("A>>B", "B>A", {"complete": True, "consistent": True, "outcome": "win"}),  # strength counts once
        ("B>A", "A>B", {"complete": True, "consistent": True, "outcome": "loss"}),
        ("A>B", "A>B", {"complete": True, "consistent": False, "outcome": "tie"}),  # always slot A
        ("A=B", "A=B", {"complete": True, "consistent": True, "outcome": "tie"}),
        ("A>B", "A=B", {"complete": True, "consistent": False, "outcome": "tie"}),
        ("A>B", None, {"complete": False}),
        (None, "B>A", {"complete": False}),
    ],
)
def test_pair_result(first, second, result) -> None:
    assert pair_result(game(first), game(second)) == result


def test_mixed_table() -> None:
    pairs = [
        pair("g1", "A>B", "B>A"),  # win
        pair("g2", "A>B", "A>B"),  # inconsistent: tie
        pair("g3", "B>A", "A>B"),  # loss
        pair("g4", "A=B", "A=B"),  # tie
        pair("g5", "A>B", None),  # incomplete
    ]
    s = winrate_summary(pairs, seed=3)
    assert (s["pairs"], s["pairs_complete"], s["pairs_incomplete"]) == (5, 4, 1)
    assert (s["wins"], s["losses"], s["ties"]) == (1, 1, 2)
    assert (s["win_rate"], s["loss_rate"], s["tie_rate"]) == (0.25, 0.25, 0.5)
    assert s["win_rate"] + s["loss_rate"] + s["tie_rate"] == 1.0
    assert s["adjusted_win_rate"] == 0.5
    assert s["position_inconsistency_rate"] == 0.25
    assert s["win_rate_ci_method"] == "wilson"
    judge = s["per_judge"]["j"]
    assert judge["first_position_rate"] == 5 / 7  # A in 5 of the 7 decisive valid games
    assert judge["consistency"] == 0.75


def test_a_judge_that_always_says_a_gives_only_ties() -> None:
    s = winrate_summary([pair(f"g{i}", "A>B", "A>B") for i in range(6)], seed=1)
    assert (s["win_rate"], s["loss_rate"], s["tie_rate"]) == (0.0, 0.0, 1.0)
    assert s["adjusted_win_rate"] == 0.5
    assert s["position_inconsistency_rate"] == 1.0
    assert s["per_judge"]["j"]["first_position_rate"] == 1.0
    assert s["per_judge"]["j"]["position_bias"] is True


def test_a_judge_that_always_says_b_is_the_mirror() -> None:
    s = winrate_summary([pair(f"g{i}", "B>A", "B>A") for i in range(6)], seed=1)
    assert s["tie_rate"] == 1.0 and s["position_inconsistency_rate"] == 1.0
    assert s["per_judge"]["j"]["first_position_rate"] == 0.0


def test_a_judge_that_only_says_tie_is_uninformative() -> None:
    s = winrate_summary([pair(f"g{i}", "A=B", "A=B") for i in range(4)], seed=1)
    assert s["position_inconsistency_rate"] == 0.0
    assert s["per_judge"]["j"]["consistency"] == 1.0
    assert s["per_judge"]["j"]["uninformative"] is True


def test_a_judge_that_recognises_the_generated_item_wins_both_orders() -> None:
    s = winrate_summary([pair(f"g{i}", "A>B", "B>A") for i in range(4)], seed=1)
    assert s["win_rate"] == 1.0 and s["position_inconsistency_rate"] == 0.0


def test_all_pairs_incomplete_gives_null_rates() -> None:
    s = winrate_summary([pair("g1", None, "A>B"), pair("g2", "A>B", None)], seed=1)
    assert s["pairs_incomplete"] == 2 and s["win_rate"] is None and s["adjusted_win_rate"] is None


def test_length_control_discounts_a_judge_that_prefers_longer() -> None:
    # the longer problem wins every time, and generated problems are mostly the longer one
    pairs = [pair(f"g{i}", "A>B", "B>A", gen=200 + i, ref=100) for i in range(6)]
    pairs += [pair(f"h{i}", "B>A", "A>B", gen=50 + i, ref=100) for i in range(2)]
    s = winrate_summary(pairs, seed=1)
    assert s["adjusted_win_rate"] == 0.75
    assert s["prefer_longer_rate"] == 1.0
    assert s["lc_win_rate"] < s["adjusted_win_rate"] - 0.1
    assert s["lc_extreme_change"] is True


def test_several_opponents_per_item_use_the_cluster_bootstrap() -> None:
    pairs = [pair(f"g{i}", "A>B", "B>A") for i in range(3)] + [pair(f"g{i}", "B>A", "A>B") for i in range(3)]
    s = winrate_summary(pairs, seed=1)
    assert s["win_rate_ci_method"] == "cluster bootstrap over items, widened to wilson"
    # every item has one win and one loss: the cluster bootstrap collapses to [0.5, 0.5];
    # 6 pairs still leave Wilson's uncertainty (3 of 6), never a point
    assert s["win_rate_ci95"] == s["adjusted_win_ci95"] == [0.187616, 0.812384]
    assert s["undefined_resamples"] == {"win_rate_ci95": 0, "adjusted_win_ci95": 0}
    assert winrate_summary(pairs, seed=1) == s


@pytest.mark.parametrize(
    ("first", "second", "wins", "interval"),
    [("A>B", "B>A", 6, [0.609666, 1.0]), ("B>A", "A>B", 0, [0.0, 0.390334])],
)
def test_rates_at_zero_or_one_with_several_opponents_keep_wilson_width(first, second, wins, interval) -> None:
    # 3 items x 2 opponents, every pair won (or lost): the cluster bootstrap alone gives a point
    pairs = [pair(f"g{i}", first, second) for i in range(3)] * 2
    s = winrate_summary(pairs, seed=1)
    assert s["win_rate_ci95"] == s["adjusted_win_ci95"] == wilson(wins, 6) == interval


@pytest.mark.parametrize(("first", "second", "rate"), [("A>B", "B>A", 1.0), ("B>A", "A>B", 0.0)])
def test_length_control_survives_all_wins_or_all_losses(first, second, rate) -> None:
    pairs = [pair(f"g{i}", first, second, gen=100 + 10 * i) for i in range(5)]
    s = winrate_summary(pairs, seed=1)
    assert s["adjusted_win_rate"] == rate
    assert s["lc_win_rate"] == pytest.approx(rate, abs=1e-6)
