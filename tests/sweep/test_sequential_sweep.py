"""`--agenteval-sequential` in a sweep: a gate naming two models draws the same (problem,
sample seed) from both and runs the betting sequence on the paired differences in [-1, 1],
stopping as soon as it is decided. The models are recorded runs (`replay:`), right on a
set share of each problem's samples, so the runs are exact and in process."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.conftest import read_results, write_jsonl

PROBLEMS = [
    {"id": i, "problem": f"Problem {i}: what is {i} + 100?", "answer": str(i + 100)} for i in range(12)
]
SAMPLES = 64  # recorded samples a problem: more than any problem is drawn in 12 x N = 192 draws
RATES = {"base": 0.3, "step-200": 0.9}
GAIN = "aime25[step-200].average_at_n >= aime25[base].average_at_n + 0.02 @ 0.95"
LOSS = "aime25[base].average_at_n >= aime25[step-200].average_at_n @ 0.95"


def recorded(path: Path, rate: float, seed: int) -> Path:
    """Each sample right with probability `rate` (a fixed draw of the RNG: exact runs)."""
    rng = random.Random(seed)
    rows = [
        {
            "problem_id": p["id"],
            "sample_index": j,
            "text": f"so \\boxed{{{p['answer'] if rng.random() < rate else 0}}}",
        }
        for p in PROBLEMS
        for j in range(SAMPLES)
    ]
    return write_jsonl(path, rows)


def sweep(aime_suite: pytest.Pytester, *args: str) -> pytest.RunResult:
    write_jsonl(aime_suite.path / "problems.jsonl", PROBLEMS)
    for index, (label, rate) in enumerate(RATES.items()):
        recorded(aime_suite.path / f"{label}.jsonl", rate, index)
    return aime_suite.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        "--dataset-path=problems.jsonl",
        "--mode=text-only",
        "--val-n=16",
        "--agenteval-out=out/aime25.jsonl",
        *(f"--model-path={label}=replay:{label}.jsonl" for label in RATES),
        *args,
    )


@pytest.mark.parametrize(
    ("gate", "status", "verdict", "workers"),
    [(GAIN, 0, "PASS", ()), (LOSS, 1, "FAIL", ()), (GAIN, 0, "PASS", ("-n", "2"))],
    ids=["gain", "loss", "gain -n 2"],
)
def test_a_paired_gate_is_decided_early_on_the_same_draws_of_both_models(
    aime_suite, gate, status, verdict, workers
):
    result = sweep(aime_suite, "--agenteval-sequential", f"--agenteval-gate={gate}", *workers)
    assert result.ret == status, result.stdout.str()[-3000:]
    out = aime_suite.path / "out"
    blocks = {}
    problems = {}
    for label in RATES:
        problems[label], (summary,) = read_results(out / f"aime25-{label}.jsonl")
        blocks[label] = summary["sequential"]
    base, step = blocks["base"], blocks["step-200"]
    used = base["draws_used"]
    assert base["stop"] == "decided" and used == step["draws_used"]
    assert used <= 192 // 4  # decided in a small share of the full run's draws
    # the same (draw, problem, sample, seed) for both models, each with its own verdict
    assert [d[:4] for d in base["draws"]] == [d[:4] for d in step["draws"]]
    assert [d[4] for d in base["draws"][:used]] != [d[4] for d in step["draws"][:used]]
    seeds = {
        label: {(p["problem_id"], g["seed"]) for p in problems[label] for g in p["generations"]}
        for label in RATES
    }
    assert seeds["base"] == seeds["step-200"]
    # the sequence ran on the differences: replaying them gives the recorded interval
    from pytest_agenteval.stats.sequential import BettingCS

    diffs = [int(s[4]) - int(b[4]) for s, b in zip(step["draws"][:used], base["draws"][:used], strict=True)]
    if gate == LOSS:
        diffs = [-d for d in diffs]
    threshold = 0.02 if gate == GAIN else 0.0
    sequence = BettingCS(0.05, bounds=(-1, 1), thresholds=[threshold]).extend(diffs)
    (entry,) = blocks["step-200" if gate == GAIN else "base"]["gates"]
    assert entry["interval"] == [sequence.interval.low, sequence.interval.high]
    assert entry["decision"] == verdict
    line = next(x for x in result.outlines if x.startswith("gate "))
    assert line.startswith(f"gate {verdict} {gate}: ") and f"after {used} of 192 paired draws" in line


def test_a_level_on_a_two_model_gate_without_sequential_mode_is_one_line(aime_suite):
    result = sweep(aime_suite, f"--agenteval-gate={GAIN}")
    assert result.ret == 4
    assert (
        f"ERROR: --agenteval-gate {GAIN!r}: a confidence on a gate comparing two models is decided by "
        "paired draws: add --agenteval-sequential, or drop the '@ LEVEL' (its paired 95% bootstrap decides)"
    ) in result.errlines


@pytest.mark.parametrize(
    ("gates", "error"),
    [
        (
            ("aime25.average_at_n >= 0.4 @ 0.95",),
            "'aime25.average_at_n >= 0.4 @ 0.95' names no model: in a sweep each sequential gate names",
        ),
        (
            ("aime25[step-200].average_at_n >= 0.4 @ 0.95",),
            "the sweep's model base is named by no gate, so nothing would stop its draws",
        ),
        (
            ("aime25[step-200].average_at_n >= aime25[base].pass_at_n @ 0.95",),
            "a paired sequence subtracts one verdict from another on each draw; name one metric on both",
        ),
    ],
)
def test_refused_in_a_sequential_sweep(aime_suite, gates, error):
    result = sweep(aime_suite, "--agenteval-sequential", *(f"--agenteval-gate={g}" for g in gates))
    assert result.ret == 4
    assert any(error in line for line in result.errlines), result.errlines


def test_a_sweep_whose_servers_start_in_waves_is_refused():
    """Each draw generates from every gated model: a server that starts only once an earlier
    one's items are done would never start (the first item waits on it), and every gate
    would fail closed after --serve-timeout."""
    from pytest_agenteval.models.serve.sweep_plan import PlannedModel, plan_servers
    from pytest_agenteval.plugin.sequential import wave_refusal

    models = [
        PlannedModel("base", "checkpoint", "/ckpt/base"),
        PlannedModel("step-200", "checkpoint", "/ckpt/s"),
    ]
    waves = plan_servers(models, "0", 1)  # two full checkpoints, one GPU: one server at a time
    assert wave_refusal(waves, {"base", "step-200"}) == (
        "each draw generates from every model its gates name, whose 2 servers cannot run at once (1 at a "
        "time: --serve-max-servers, or the GPUs of --serve-gpus / --serve-tp), so a later one would never "
        "start; give them the GPUs to run together, gate fewer models a run, or drop --agenteval-sequential"
    )
    assert wave_refusal(plan_servers(models, "0,1", 1), {"base", "step-200"}) is None  # together
    assert wave_refusal(plan_servers(models, "0,1", 1, max_servers=1), {"base", "step-200"}) is not None
    assert wave_refusal(waves, {"step-200"}) is None  # one gated model: one server
