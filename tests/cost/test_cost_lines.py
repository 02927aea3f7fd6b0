"""The terminal's cost line a user reads (output/cost.py cost_lines): `n/a` where nothing
has a price (the summary's `usd` is null, as docs/cost.md says), the priced part with
`+ n/a` where some of it has none, and device time in minutes and seconds across the
devices, beside the run's own wall time."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_agenteval.output.cost import cost_lines, format_duration
from pytest_agenteval.testing import OpenAITestServer
from tests.conftest import read_results


def summary(cost: dict[str, Any], duration_s: float = 32.1, **more: Any) -> dict[str, Any]:
    return {"suite": "aime25", "duration_s": duration_s, "cost": cost, **more}


UNPRICED = {"generations": 4, "unpriced": 4, "usd": 0.0}
PRICED = {"generations": 4, "unpriced": 0, "usd": 0.0182}
DEVICE = {"usd": None, "by_model": {}, "by_judge": {}, "devices": 2, "device_seconds": 64.2}


@pytest.mark.parametrize(
    ("given", "line"),
    [
        (
            summary({"usd": None, "by_model": {"mock-model": UNPRICED}}),
            "cost aime25: n/a (no price for mock-model: --prices FILE)",
        ),
        (
            summary({"usd": 0.0182, "by_model": {"gpt-4o-mini": PRICED, "judge-x": UNPRICED}}),
            "cost aime25: $0.018200 + n/a (no price for judge-x: --prices FILE)",
        ),
        (
            summary({"usd": 0.0182, "by_model": {"gpt-4o-mini": PRICED}}),
            "cost aime25: $0.018200",
        ),
        (
            summary({**DEVICE, "device_seconds": 289.4}, duration_s=144.7),
            "cost aime25: device time 4 m 49 s across 2 devices (the run took 2 m 25 s)",
        ),
        (
            summary({**DEVICE, "devices": 1, "device_seconds": 32.1}),
            "cost aime25: device time 32 s on 1 device (the run took 32 s)",
        ),
        (
            summary(
                {**DEVICE, "devices": 1, "device_seconds": 32.1, "generation_device_seconds": 289.4},
                model_label="other",
            ),
            "cost aime25[other]: device time 4 m 49 s generating on 1 device (its requests' latencies "
            "added up, overlapping; the sweep took 32 s, shared by its models)",
        ),
    ],
    ids=["unpriced", "partly-priced", "priced", "two-devices", "one-device", "sweep-model"],
)
def test_the_cost_line(given: dict[str, Any], line: str) -> None:
    assert cost_lines([given]) == [line]


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0.0, "0 s"),
        (0.44, "0.4 s"),
        (9.96, "10 s"),
        (32.1, "32 s"),
        (59.6, "1 m 0 s"),
        (289.4, "4 m 49 s"),
        (3600.0, "1 h 0 m"),
        (3 * 3600 + 25 * 60 + 40, "3 h 26 m"),
        (250 * 3600, "250 h 0 m"),
    ],
)
def test_a_duration_in_hours_minutes_and_seconds(seconds: float, shown: str) -> None:
    assert format_duration(seconds) == shown


def test_an_unpriced_model_costs_n_a_and_its_summary_null(run_suite) -> None:
    with OpenAITestServer() as server:
        result, out = run_suite(f"--endpoint={server.url}", "--val-n=1", "--max-tokens=8")
    _, (summary,) = read_results(out)
    cost = summary["cost"]
    unpriced = cost["by_model"]["mock-model"]["unpriced"]
    assert (cost["usd"], cost["usd_from_cache"], unpriced) == (None, None, summary["generations"])
    assert "cost aime25: n/a (no price for mock-model: --prices FILE)" in result.outlines
