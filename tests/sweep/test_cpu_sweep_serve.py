"""The sweep issue 23 asks for, on the CPU, as a user runs it: `pytest suites/aime25 -n 2`
over two models and an adapter with `--serve`. The embedded SmolLM2 gguf is the base, a
seeded GGUF LoRA on it stands for a fine-tuned checkpoint (served beside its base by ONE
llama.cpp server), and a perturbed copy of the gguf is a second full model (a server of its
own). Three results files, the comparison report, and a gate naming two models that
decides the exit status with the paired comparison. One server up at a time
(`--serve-max-servers 1`, docs/sweeps.md's CPU example): base and adapter first, the other
gguf after, the workers handed each wave's servers; the uncapped -n 2 sweep is
docs/sweeps.md's doc-tested block, every CPU server at once tests/serving/test_sweep_servers.py's."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_agenteval.models import embedded_model_path
from tests.conftest import link_or_copy, read_results, run_in_a_process

ROOT = Path(__file__).resolve().parents[2]
POST = '"POST /v1/chat/completions HTTP/1.1" 200'
# the docs' example problems, the first ten: the fewest a gate decides on (fewer paired
# problems fail it closed); each count below is per problem, and ten show it as twelve did
PROBLEMS = 10
# SmolLM2 solves none of these in 8 tokens: the LoRA is no worse than the base (delta 0,
# interval [0, 0]) and, as surely, no better
NO_WORSE = "aime25[lora-step-200].average_at_n >= aime25[base].average_at_n - 0.5"


def _args(gate: str, xdist: bool) -> list[str]:
    base = embedded_model_path()
    return [
        "suites/aime25",
        "-p",
        "no:cacheprovider",
        "-n",
        "2" if xdist else "0",
        "--dataset-path=problems.jsonl",
        "--mode=text-only",
        "--val-n=1",
        "--max-tokens=8",
        "--n-ctx=1024",
        "--serve",
        "--serve-max-servers=1",
        f"--model-path=base={base}",
        f"--base-model={base}",
        "--model-path=ckpts/lora-step-200.gguf",
        "--model-path=ckpts/other.gguf",
        "--agenteval-out=sweep/aime25.jsonl",
        "--agenteval-cache-dir=cache",
        f"--agenteval-gate={gate}",
    ]


@dataclass
class Sweep:
    folder: Path
    result: pytest.RunResult
    logs: dict[str, str]  # server log name -> its text, as the -n 2 run left it
    leftovers: list[str]  # what the run left of its serve folders (keys, configs)


@pytest.fixture(scope="module")
def sweep(
    tmp_path_factory: pytest.TempPathFactory, agenteval_gguf_lora: Path, agenteval_perturbed_gguf: Path
) -> Sweep:
    """The sweep as a user runs it (its own process, -n 2), once for the module's two tests:
    each asserts on its part of it."""
    folder = tmp_path_factory.mktemp("cpu-sweep")
    shutil.copytree(ROOT / "suites" / "aime25", folder / "suites" / "aime25")
    rows = (ROOT / "docs" / "examples" / "sweep" / "problems.jsonl").read_text().splitlines(keepends=True)
    (folder / "problems.jsonl").write_text("".join(rows[:PROBLEMS]))
    (folder / "ckpts").mkdir()
    link_or_copy(agenteval_gguf_lora, folder / "ckpts" / "lora-step-200.gguf")
    link_or_copy(agenteval_perturbed_gguf, folder / "ckpts" / "other.gguf")
    result = run_in_a_process(folder, *_args(NO_WORSE, xdist=True))
    out = folder / "sweep"
    logs = {p.name: p.read_text() for p in sorted(out.glob("server-*.log"))}
    return Sweep(folder, result, logs, [p.name for p in out.glob(".agenteval-serve-*")])


def test_a_sweep_serves_base_and_adapter_together_and_the_other_gguf_after_with_xdist(sweep: Sweep) -> None:
    # merged from tests/serving/test_sweep_serve_e2e.py's -n 2 case: the same sweep (the base,
    # its LoRA and another gguf with --serve, --serve-max-servers 1, -n 2), on the docs' problems
    outcomes = sweep.result.parseoutcomes()  # the suite's unsolved problems are xfailed
    assert sum(outcomes.get(k, 0) for k in ("passed", "failed", "xfailed", "xpassed")) == 3 * PROBLEMS
    assert "errors" not in outcomes and "error" not in outcomes
    assert list(sweep.logs) == ["server-0-base.log", "server-1-other.log"]  # two servers, not three
    assert [text.count(POST) for text in sweep.logs.values()] == [2 * PROBLEMS, PROBLEMS]
    stderr = sweep.result.stderr.str()
    stopped = stderr.index("stopped the server of base, lora-step-200: its items are done")
    assert stopped < stderr.index("starting llama-cpp server 2/2 for other")  # a wave: one after the other
    assert sweep.leftovers == []  # the served files (keys) went with the run


def test_two_models_and_an_adapter_in_one_run_with_xdist(
    sweep: Sweep, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = sweep.result
    assert result.ret == 0, result.stdout.str()[-3000:]
    out = sweep.folder / "sweep"
    files = sorted(p.name for p in out.iterdir())
    assert files == [
        "aime25-base.jsonl",
        "aime25-lora-step-200.jsonl",
        "aime25-other.jsonl",
        "aime25-report.html",
        "server-0-base.log",  # base AND its LoRA
        "server-1-other.log",
    ]
    # one server answered the base and the adapter (10 problems each), the other the second gguf
    posts = [text.count(POST) for text in sweep.logs.values()]
    assert posts == [2 * PROBLEMS, PROBLEMS]
    labels = {}
    for name in ("base", "lora-step-200", "other"):
        problems, (summary,) = read_results(out / f"aime25-{name}.jsonl")
        assert summary["model_label"] == name and summary["problems"] == PROBLEMS
        assert {p["model"] for p in problems} == {name}
        labels[name] = summary["model"]
    assert labels["lora-step-200"]["served"]["model"]["kind"] == "gguf-adapter"
    (gate,) = read_results(out / "aime25-lora-step-200.jsonl")[1][0]["gates"]
    assert gate["passed"] is True and gate["paired_problems"] == PROBLEMS
    assert f"report: {Path('sweep') / 'aime25-report.html'}" in result.outlines
    # each model's cost line: its own generations' device time, not the whole run's three times
    cost = next(line for line in result.outlines if line.startswith("cost aime25[other]: "))
    assert "generating on 1 device (its requests' latencies added up, overlapping; the sweep took " in cost
    html = (out / "aime25-report.html").read_text(encoding="utf-8")
    assert all(label in html for label in ("base (reference)", "lora-step-200", "other"))

    # the same sweep gated on a gain the LoRA does not show: the gate, not the items, fails it
    # (in this process, no workers: the gate is the controller's either way, and -n 2 ran above)
    gain = "aime25[lora-step-200].average_at_n >= aime25[base].average_at_n + 0.02"
    monkeypatch.chdir(sweep.folder)  # the sweep's folder (its cache), with pytester's isolation
    again = pytester.runpytest_inprocess(*_args(gain, xdist=False))
    assert again.ret == 1
    assert any(line.startswith(f"gate FAIL  {gain}") for line in again.outlines)
    summary = read_results(out / "aime25-lora-step-200.jsonl")[1][0]
    assert (summary["requests"]["attempts"], summary["requests"]["cached_generations"]) == (0, PROBLEMS)
