"""A model the run runs itself costs device time, not dollars: the embedded model's
generations record `device_seconds` (their latency x 1 device), the summary the run's wall
time x the processes that load it (each xdist worker its own copy), and --max-cost asks no
price for it."""

from __future__ import annotations

import pytest

from pytest_agenteval.output.cost import format_duration
from tests.conftest import read_results


def test_the_embedded_model_records_device_seconds(run_suite) -> None:
    result, out = run_suite("--limit=2", "--val-n=1", "--max-tokens=8", "--max-cost=0.01")
    problems, (summary,) = read_results(out)
    for problem in problems:
        (generation,) = problem["generations"]
        assert generation["device_seconds"] == round(generation["latency_s"], 3) > 0
        assert "cost_usd" not in generation
    cost = summary["cost"]
    assert (cost["devices"], cost["usd"], cost["by_model"]) == (1, None, {})
    assert cost["device_seconds"] == pytest.approx(summary["duration_s"], abs=0.01)
    assert cost["generation_device_seconds"] == round(
        sum(p["generations"][0]["device_seconds"] for p in problems), 3
    )
    held, took = format_duration(cost["device_seconds"]), format_duration(summary["duration_s"])
    assert f"cost aime25: device time {held} on 1 device (the run took {took})" in result.outlines
    assert (
        summary["budget"]["spent_usd"] == 0.0 and summary["budget"]["requests"] == 2
    )  # tokens counted, no dollars


@pytest.mark.parametrize(("workers", "devices"), [(0, 1), (2, 2)])
def test_each_xdist_worker_holds_its_own_copy_of_an_in_process_model(
    run_suite, workers: int, devices: int
) -> None:
    result, out = run_suite("--limit=2", "--val-n=1", "--max-tokens=8", f"-n={workers}")
    _, (summary,) = read_results(out)
    cost = summary["cost"]
    assert cost["devices"] == devices
    assert cost["device_seconds"] == pytest.approx(summary["duration_s"] * devices, abs=0.02)
    shown = "on 1 device" if devices == 1 else f"across {devices} devices"
    held = format_duration(cost["device_seconds"])
    assert f"device time {held} {shown} (the run took " in result.stdout.str()
