"""A checkpoint sweep on the in-process transformers fallback (no inference server can be
launched): the base checkpoint and a seeded LoRA adapter on it, in one run. Each model has
its own results file and summary block, its own identity, the same sample seeds, and exactly
the generations a one-model run of it gives: the sweep shares nothing between the models
that could make one answer as the other. Both runs are in this process (-n 0: both models in
one process, where sharing would show; the sweep with `-n 2` workers is tests/sweep's), each
loading its models afresh, so the one-model run cannot reuse the sweep's model objects."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import read_results
from tests.transformers import skip_without_backend

skip_without_backend()  # the imports above need none of the backend's packages

# Imported here, before the in-process runs: pytester drops the modules a run imported when
# it ends, and torch's C extension cannot be loaded a second time in one process.
import peft  # noqa: E402, F401
import torch  # noqa: E402, F401
import transformers  # noqa: E402, F401

from pytest_agenteval.models.backends import checkpoint  # noqa: E402

FAST = ("--mode=text-only", "--limit=2", "--val-n=2", "--max-tokens=12", "--agenteval-no-cache")


@pytest.fixture(scope="module")
def strong_adapter(hf_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A LoRA that changes what the model samples within 12 tokens (the shared
    `live_adapter` is scaled to barely move the logits, and samples as its base does)."""
    from pytest_agenteval.testing.models import make_peft_adapter

    return make_peft_adapter(hf_checkpoint, tmp_path_factory.mktemp("lora-strong"), seed=3, b_scale=1.0)


def _samples(path: Path) -> list[tuple]:
    problems, _ = read_results(path)
    return [
        (p["problem_id"], g["sample_index"], g["seed"], g["text"]) for p in problems for g in p["generations"]
    ]


def test_base_and_adapter_sweep_in_process_equals_one_model_runs(
    aime_suite: pytest.Pytester,
    tiny_aime: Path,
    hf_checkpoint: Path,
    strong_adapter: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def run(*args: str) -> pytest.RunResult:
        # the process's loaded models (checkpoint.load_model's cache) are not the run's own:
        # each run loads what it uses, as a process of its own would
        monkeypatch.setattr(checkpoint, "_MODELS", {})
        return aime_suite.runpytest_inprocess(
            "-p", "no:cacheprovider", f"--dataset-path={tiny_aime}", *FAST, *args
        )

    result = run(
        "--agenteval-out=out/run.jsonl",
        f"--model-path=base={hf_checkpoint}",
        f"--model-path=step-1={strong_adapter}",
    )
    assert result.ret in (0, 1), result.stdout.str()[-3000:]  # passed or honestly failed, no error
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 4  # 2 models x 2 problems
    (base,) = read_results(aime_suite.path / "out" / "run-base.jsonl")[1]
    (step,) = read_results(aime_suite.path / "out" / "run-step-1.jsonl")[1]
    assert (base["model_label"], step["model_label"]) == ("base", "step-1")
    assert base["model"]["backend"] == step["model"]["backend"] == "transformers"
    assert "adapter" not in base["model"] and step["model"]["adapter"] == str(strong_adapter)
    assert step["model"]["base"] == str(hf_checkpoint)
    base_samples = _samples(aime_suite.path / "out" / "run-base.jsonl")
    step_samples = _samples(aime_suite.path / "out" / "run-step-1.jsonl")
    assert [s[:3] for s in base_samples] == [s[:3] for s in step_samples]  # paired: same seeds
    assert [s[3] for s in base_samples] != [s[3] for s in step_samples]  # the adapter answers otherwise

    alone = run("--agenteval-out=alone.jsonl", f"--model-path={strong_adapter}")
    assert alone.ret in (0, 1), alone.stdout.str()[-3000:]
    assert _samples(aime_suite.path / "alone.jsonl") == step_samples  # as if run by itself
