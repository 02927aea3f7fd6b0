"""Gates that name models decide a sweep's exit status through the plugin, and the sweep
writes its comparison report. The three models are recorded runs
(`docs/examples/sweep/`: base solves 3 of 12 problems, step-100 4, step-200 11), re-scored
with `LABEL=replay:FILE`, so the verdicts are exact and the runs take seconds."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import read_results

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples" / "sweep"
STEP200_OVER_BASE = "aime25[step-200].average_at_n >= aime25[base].average_at_n + 0.02"
STEP100_OVER_BASE = "aime25[step-100].average_at_n >= aime25[base].average_at_n + 0.02"


def _sweep(aime_suite: pytest.Pytester, *args: str) -> pytest.RunResult:
    shutil.copytree(EXAMPLES, aime_suite.path / "sweep")
    # in this process (tests/conftest.py run_suite): no interpreter to start and import
    return aime_suite.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        "--dataset-path=sweep/problems.jsonl",
        "--mode=text-only",
        "--val-n=2",
        "--agenteval-out=out/aime25.jsonl",
        *(f"--model-path={label}=replay:sweep/{label}.jsonl" for label in ("base", "step-100", "step-200")),
        *args,
    )


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
@pytest.mark.parametrize(
    ("gate", "status", "verdict"),
    [
        (STEP200_OVER_BASE, 0, "PASS"),  # +0.667, interval [+0.417, +0.917]
        (STEP100_OVER_BASE, 1, "FAIL"),  # +0.083 on paper, interval [+0.000, +0.250]: not shown
    ],
    ids=["paired-gain", "gain-within-noise"],
)
def test_a_gate_naming_two_models_decides_the_exit_status(
    aime_suite: pytest.Pytester, workers: tuple, gate: str, status: int, verdict: str
) -> None:
    result = _sweep(aime_suite, f"--agenteval-gate={gate}", *workers)
    assert result.ret == status
    line = next(x for x in result.outlines if x.startswith(f"gate {verdict}"))
    assert gate in line and "paired" in line
    out = aime_suite.path / "out"
    assert sorted(p.name for p in out.iterdir()) == [
        "aime25-base.jsonl",
        "aime25-report.html",
        "aime25-step-100.jsonl",
        "aime25-step-200.jsonl",
    ]
    named = gate.split("[")[1].split("]")[0]
    _, (summary,) = read_results(out / f"aime25-{named}.jsonl")
    (recorded,) = summary["gates"]
    assert recorded["gate"] == gate and recorded["passed"] is (status == 0)
    assert result.outlines[-2].startswith("report: ") or any(
        x == f"report: {out.relative_to(aime_suite.path) / 'aime25-report.html'}" for x in result.outlines
    )
    walls = [line for line in result.outlines if line.strip().startswith("wall time")]
    assert len(walls) == 3 and all(
        line.endswith(" s (the whole sweep's: its models run together)") for line in walls
    )
    html = (out / "aime25-report.html").read_text(encoding="utf-8")
    assert "base (reference)" in html and "significant gain" in html


def test_a_gate_naming_a_model_outside_the_sweep_is_one_line_at_start_up(aime_suite: pytest.Pytester) -> None:
    result = _sweep(aime_suite, "--agenteval-gate=aime25[step-20].average_at_n >= 0.3")
    assert result.ret == 4
    assert (
        "ERROR: --agenteval-gate 'aime25[step-20].average_at_n >= 0.3': no model labelled 'step-20' in "
        "this sweep; its labels: base, step-100, step-200"
    ) in result.errlines
    assert not (aime_suite.path / "out").exists()
