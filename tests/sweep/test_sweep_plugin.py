"""A checkpoint sweep through the plugin: two in-process GGUF models in one run, each
problem one item per model (`test_aime25[step-200:0]`), a marker per model, one results
file and summary block per model, unnamed gates applied to each model's block, paired
seeds, and a generation cache that never mixes the models.

The second model is a different gguf: the embedded SmolLM2 with a few norm weights
perturbed from a seed (`pytest_agenteval.testing.models.make_perturbed_gguf`), so the two
models really generate differently; AGENTEVAL_SWEEP_SECOND_GGUF names another one."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_agenteval.models import embedded_model_path
from tests.conftest import link_or_copy, read_results

FAST = ("--limit=2", "--val-n=2", "--max-tokens=8", "--agenteval-cache-dir=cache")


@pytest.fixture
def sweep(
    aime_suite: pytest.Pytester, tiny_aime: Path, agenteval_perturbed_gguf: Path
) -> Callable[..., tuple[pytest.RunResult, Path]]:
    """`base` (the embedded gguf, labelled) and `ckpts/step-200.gguf` (by a glob)."""
    (aime_suite.path / "ckpts").mkdir()
    second = os.environ.get("AGENTEVAL_SWEEP_SECOND_GGUF") or str(agenteval_perturbed_gguf)
    link_or_copy(second, aime_suite.path / "ckpts" / "step-200.gguf")

    def run(*args: str) -> tuple[pytest.RunResult, Path]:
        result = aime_suite.runpytest_inprocess(
            "-p",
            "no:cacheprovider",
            f"--dataset-path={tiny_aime}",
            "--mode=text-only",
            "--agenteval-out=out/run.jsonl",
            f"--model-path=base={embedded_model_path()}",
            "--model-path=ckpts/step-*.gguf",
            *args,
        )
        return result, aime_suite.path / "out"

    return run


def _files(out: Path) -> dict[str, tuple[list[dict], list[dict]]]:
    return {path.name: read_results(path) for path in sorted(out.glob("*.jsonl"))}


def one_file_and_block_per_model_with_paired_seeds(result: pytest.RunResult, out: Path) -> None:
    assert result.ret == 1  # SmolLM2 solves none in 8 tokens: plain pytest failures
    files = _files(out)
    assert sorted(files) == ["run-base.jsonl", "run-step-200.jsonl"]
    seeds = {}
    for label in ("base", "step-200"):
        problems, (summary,) = files[f"run-{label}.jsonl"]
        assert [p["nodeid"] for p in problems] == [
            f"test_tiny.py::test_aime25[{label}:0]",
            f"test_tiny.py::test_aime25[{label}:1]",
        ]
        assert {p["model"] for p in problems} == {label}
        assert (summary["model_label"], summary["problems"], summary["generations"]) == (label, 2, 4)
        seeds[label] = [[g["seed"] for g in p["generations"]] for p in problems]
    assert files["run-step-200.jsonl"][1][0]["model"]["path"].endswith("ckpts/step-200.gguf")
    assert files["run-base.jsonl"][1][0]["model_path"] == str(embedded_model_path())
    assert seeds["base"] == seeds["step-200"]  # paired: the same samples of each problem
    text = result.stdout.str()
    assert "model base: aime25 average@2 0.000" in text
    assert "model step-200: aime25 average@2 0.000" in text
    assert "results: out/run-base.jsonl" in text and "results: out/run-step-200.jsonl" in text


def test_a_sweep_writes_one_file_and_block_per_model_with_paired_seeds_with_xdist(sweep) -> None:
    # serially: the first run of test_the_cache_keeps_each_model_apart (the same run)
    one_file_and_block_per_model_with_paired_seeds(*sweep(*FAST, "-n", "2"))


@pytest.mark.parametrize(
    ("selection", "ids"),
    [
        (("-m", "model_step_200"), ["step-200:0", "step-200:1", "step-200:2", "step-200:3"]),
        (("-k", "step-200"), ["step-200:0", "step-200:1", "step-200:2", "step-200:3"]),
        (("-m", "model_base", "--limit=1"), ["base:0"]),
        (("--limit=1",), ["base:0", "step-200:0"]),  # per model
        (("--limit=2", "--agenteval-shard=1/2"), ["base:1", "step-200:1"]),  # each shard: a part of each
        (("--strict-markers", "-m", "model_base and not model_step_200", "--limit=2"), ["base:0", "base:1"]),
    ],
)
def test_markers_keywords_and_limits_select_per_model(sweep, selection: tuple, ids: list[str]) -> None:
    result, _ = sweep("--collect-only", "-q", *selection)
    listed = [line.split("[")[1].rstrip("]") for line in result.outlines if "::test_aime25[" in line]
    assert listed == ids


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_an_unnamed_gate_holds_for_every_model_and_all_decide_the_exit(sweep, workers: tuple) -> None:
    gate, few = (
        "--agenteval-gate=aime25.problems >= 2",
        ("--val-n=2", "--max-tokens=8", "--agenteval-cache-dir=cache"),
    )
    # base (the first model) has one problem and fails the gate; step-200 (the last) passes it
    failed, out = sweep(*few, *workers, gate, "-k", "base:0 or step-200:0 or step-200:1")
    assert failed.ret == 1
    lines = failed.stdout.lines
    start = lines.index("model base: aime25 average@2 0.000")
    second = lines.index("model step-200: aime25 average@2 0.000")
    verdicts = [line.split("  (")[0] for line in lines[start:] if line.startswith("gate ")]
    assert verdicts == ["gate FAIL  aime25.problems >= 2", "gate PASS  aime25.problems >= 2"]
    assert lines.index(next(line for line in lines if line.startswith("gate FAIL"))) < second
    for label, verdict in (("base", False), ("step-200", True)):
        _, (summary,) = read_results(out / f"run-{label}.jsonl")
        assert [g["passed"] for g in summary["gates"]] == [verdict]
    both = "base:0 or base:1 or step-200:0 or step-200:1"
    passed, _ = sweep(*few, *workers, gate, "-k", both)  # both pass: the unsolved items are forgiven
    assert passed.ret == 0


def test_a_serial_sweep_writes_one_file_and_block_per_model_and_the_cache_keeps_each_model_apart(
    sweep, aime_suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # one run, two tests (merged: test_a_sweep_writes_one_file_and_block_per_model_with_paired_seeds[serial])
    one_file_and_block_per_model_with_paired_seeds(*sweep(*FAST))
    # the second run, from the cache, is also the JUnit and step-summary test's (merged:
    # test_junit_and_the_step_summary_have_one_entry_per_suite_and_model, the same FAST sweep)
    again, out = _junit_and_step_summary(sweep, aime_suite, monkeypatch)
    sent = {name: s[0]["requests"]["attempts"] for name, (_, s) in _files(out).items()}
    assert sent == {"run-base.jsonl": 0, "run-step-200.jsonl": 0}
    assert "8 of 8 generations from the cache" in again.stdout.str()
    ckpt = aime_suite.path / "ckpts" / "step-200.gguf"
    weights = ckpt.read_bytes()
    ckpt.unlink()  # a hard link to the session's file: the new weights go to a file of its own
    ckpt.write_bytes(weights + b"new weights")  # another file: its fingerprint, its own generations
    _, out = sweep(*FAST)
    sent = {name: s[0]["requests"]["attempts"] for name, (_, s) in _files(out).items()}
    assert sent == {"run-base.jsonl": 0, "run-step-200.jsonl": 4}


def _junit_and_step_summary(
    sweep, aime_suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> tuple[pytest.RunResult, Path]:
    """JUnit and the step summary have one entry per suite and model."""
    target = aime_suite.path / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    junit = aime_suite.path / "junit.xml"
    result, out = sweep(*FAST, f"--junitxml={junit}", "--agenteval-gate=aime25.problems >= 2")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    assert result.ret == 0
    import xml.etree.ElementTree as ET

    properties = {p.get("name"): p.get("value") for p in ET.parse(junit).getroot().iter("property")}
    assert {k: v for k, v in properties.items() if k.endswith(".problems") or ".gate." in k} == {
        "agenteval.aime25[base].problems": "2",
        "agenteval.aime25[step-200].problems": "2",
        "agenteval.gate.1": "PASS aime25.problems >= 2 [base] (2.0000 >= 2 holds)",
        "agenteval.gate.2": "PASS aime25.problems >= 2 [step-200] (2.0000 >= 2 holds)",
    }
    headings = [line for line in target.read_text().splitlines() if line.startswith("### ")]
    assert headings == [
        "### aime25[base] · text-only · SmolLM2-135M-Instruct.Q4_1 (gguf)",
        "### aime25[step-200] · text-only · step-200 (gguf)",
        "### Gates",
    ]
    return result, out


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ("--endpoint=http://127.0.0.1:9/v1",),
            "ERROR: --endpoint with 2 --model-path models (base, step-200): a sweep samples each model "
            "from its own server; drop --endpoint (the models run in-process, or with --serve on launched "
            "servers), or run one --endpoint per run",
        ),
        (
            ("--model-path=step-200=ckpts/step-200.gguf",),
            "ERROR: --model-path: ckpts/step-200.gguf and ckpts/step-200.gguf both have the label "
            "'step-200'; name one with --model-path LABEL=PATH",
        ),
        (
            ("--model-path=ckpts/none-*",),
            "ERROR: --model-path ckpts/none-*: the glob matches nothing; fix the pattern",
        ),
        (
            ("--model-path=replay:old.jsonl",),
            "ERROR: --model-path replay:old.jsonl: label 'replay:old.jsonl' has characters other than "
            "A-Z a-z 0-9 . _ -; name it with --model-path LABEL=PATH",
        ),
        (
            ("--model-path=trio://run/sampler_weights/5",),
            "ERROR: --model-path trio://run/sampler_weights/5 in a sweep: trio:// checkpoints are "
            "evaluated one per run; run each with its own --model-path",
        ),
    ],
)
def test_what_a_sweep_cannot_do_is_one_line_at_start_up(sweep, args: tuple, line: str) -> None:
    result, _ = sweep(*args)
    assert result.ret == 4
    assert result.errlines == [line] or line in result.errlines
