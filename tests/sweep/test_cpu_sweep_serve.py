"""The sweep issue 23 asks for, on the CPU, as a user runs it: `pytest suites/aime25 -n 2`
over two models and an adapter with `--serve`. The embedded SmolLM2 gguf is the base, a
seeded GGUF LoRA on it stands for a fine-tuned checkpoint (served beside its base by ONE
llama.cpp server), and a perturbed copy of the gguf is a second full model (a server of its
own). Three results files, the comparison report, and a gate naming two models that
decides the exit status with the paired comparison."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pytest_agenteval.models import embedded_model_path
from tests.conftest import read_results

ROOT = Path(__file__).resolve().parents[2]
POST = '"POST /v1/chat/completions HTTP/1.1" 200'
# the docs' example problems, the first ten: the fewest a gate decides on (fewer paired
# problems fail it closed); each count below is per problem, and ten show it as twelve did
PROBLEMS = 10


def _link(source: Path, target: Path) -> None:
    """`source`'s bytes under `target`: a hard link where the filesystem allows (no 98 MB copy)."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


@pytest.fixture
def sweep_folder(
    pytester: pytest.Pytester, agenteval_gguf_lora: Path, agenteval_perturbed_gguf: Path
) -> Path:
    shutil.copytree(ROOT / "suites" / "aime25", pytester.path / "suites" / "aime25")
    rows = (ROOT / "docs" / "examples" / "sweep" / "problems.jsonl").read_text().splitlines(keepends=True)
    (pytester.path / "problems.jsonl").write_text("".join(rows[:PROBLEMS]))
    (pytester.path / "ckpts").mkdir()
    _link(agenteval_gguf_lora, pytester.path / "ckpts" / "lora-step-200.gguf")
    _link(agenteval_perturbed_gguf, pytester.path / "ckpts" / "other.gguf")
    return pytester.path


def _run(pytester: pytest.Pytester, gate: str, xdist: bool = True) -> pytest.RunResult:
    """As a user runs it: its own process, -n 2; `xdist=False`: in this process, no workers."""
    base = embedded_model_path()
    runner = pytester.runpytest_subprocess if xdist else pytester.runpytest_inprocess
    return runner(
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
        f"--model-path=base={base}",
        f"--base-model={base}",
        "--model-path=ckpts/lora-step-200.gguf",
        "--model-path=ckpts/other.gguf",
        "--agenteval-out=sweep/aime25.jsonl",
        "--agenteval-cache-dir=cache",
        f"--agenteval-gate={gate}",
    )


def test_two_models_and_an_adapter_in_one_run_with_xdist(
    pytester: pytest.Pytester, sweep_folder: Path
) -> None:
    # SmolLM2 solves none of these in 8 tokens: the LoRA is no worse than the base (delta 0,
    # interval [0, 0]) and, as surely, no better
    no_worse = "aime25[lora-step-200].average_at_n >= aime25[base].average_at_n - 0.5"
    result = _run(pytester, no_worse)
    assert result.ret == 0, result.stdout.str()[-3000:]
    out = sweep_folder / "sweep"
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
    posts = [(out / f).read_text().count(POST) for f in files if f.endswith(".log")]
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
    again = _run(pytester, gain, xdist=False)
    assert again.ret == 1
    assert any(line.startswith(f"gate FAIL  {gain}") for line in again.outlines)
    summary = read_results(out / "aime25-lora-step-200.jsonl")[1][0]
    assert (summary["requests"]["attempts"], summary["requests"]["cached_generations"]) == (0, PROBLEMS)
