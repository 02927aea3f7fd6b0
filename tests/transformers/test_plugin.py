"""The transformers backend through pytest (pytester runs on a tiny AIME suite):
a peft adapter on its base checkpoint, the adapter-is-live warning, the same generations
with -n 0 and -n 2, and one start-up line for each bad input."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import read_results
from tests.transformers import skip_without_backend

skip_without_backend()  # the imports above need none of the backend's packages

# Imported here, before any in-process run: pytester drops the modules a run imported when
# it ends, and torch's C extension cannot be loaded a second time in one process.
import peft  # noqa: E402, F401
import torch  # noqa: E402
import transformers  # noqa: E402, F401


def _generations(path: Path) -> list[tuple[int, int, int, str, int]]:
    problems, _ = read_results(path)
    return [
        (p["problem_id"], g["sample_index"], g["seed"], g["text"], g["completion_tokens"])
        for p in problems
        for g in p["generations"]
    ]


def test_adapter_on_its_base_checkpoint_runs_the_suite(
    run_suite, hf_checkpoint: Path, live_adapter: Path
) -> None:
    # 4 problems x 2 samples, 2 problems in flight at a time (the engine holds 2N)
    args = ("--limit=4", "--val-n=2", "--max-tokens=12", "--agenteval-no-cache")
    result, path = run_suite(*args, f"--model-path={live_adapter}", f"--base-model={hf_checkpoint}")
    assert result.ret in (0, 1), result.stdout.str()  # passed or honestly failed, never errors
    problems, (summary,) = read_results(path)
    assert summary["complete"] is True and summary["errors"]["items"] == 0
    assert [p["complete"] for p in problems] == [True] * 4
    texts = [t for *_, t, _ in _generations(path)]
    assert len(texts) == 8 and all(t.strip() for t in texts) and len(set(texts)) >= 6
    model = summary["model"]
    assert model["backend"] == "transformers" and model["base"] == str(hf_checkpoint)
    assert model["adapter"] == str(live_adapter) and model["batch_rows"] == 2
    assert len(model["adapter_fingerprint"]) == len(model["checkpoint_fingerprint"]) == 64
    assert model["adapter_probe"]["live"] is True and "warning" not in model
    # each problem's 2 samples were one batch of 2 rows, whatever the timing
    assert summary["backend"]["batches"] == 4 and summary["backend"]["batched_rows"] == 8
    assert summary["tokens"]["completion"] == sum(n for *_, n in _generations(path)) <= 8 * 12


def test_zero_adapter_is_flagged_loudly(run_suite, hf_checkpoint: Path, zero_adapter: Path) -> None:
    result, path = run_suite(
        "--limit=1",
        "--val-n=1",
        "--max-tokens=4",
        f"--model-path={zero_adapter}",
        f"--base-model={hf_checkpoint}",
    )
    assert "WARNING: ADAPTER IS NOT LIVE" in result.stderr.str()
    _, (summary,) = read_results(path)
    assert summary["model"]["adapter_probe"]["live"] is False
    assert summary["model"]["adapter_probe"]["max_abs_logprob_diff"] == 0.0
    assert summary["model"]["warning"].startswith("ADAPTER IS NOT LIVE")

    strict, _ = run_suite(
        "--limit=1", f"--model-path={zero_adapter}", f"--base-model={hf_checkpoint}", "--strict-adapter"
    )
    assert strict.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = [x for x in strict.stderr.lines if x.startswith("ERROR:")]
    assert line.startswith("ERROR: ADAPTER IS NOT LIVE") and line.endswith("(--strict-adapter)")


def test_chat_template_file_stands_in_for_a_missing_one(
    run_suite, hf_checkpoint: Path, tmp_path: Path
) -> None:
    bare = tmp_path / "no-template"  # the checkpoint's tokenizer and weights, its template removed
    bare.mkdir()
    for item in hf_checkpoint.iterdir():
        if item.name not in ("tokenizer_config.json", "chat_template.jinja"):
            (bare / item.name).symlink_to(item)
    config = json.loads((hf_checkpoint / "tokenizer_config.json").read_text())
    template = tmp_path / "template.jinja"
    template.write_text(
        config.pop("chat_template", None) or (hf_checkpoint / "chat_template.jinja").read_text()
    )
    (bare / "tokenizer_config.json").write_text(json.dumps(config))
    missing, _ = run_suite("--limit=1", f"--model-path={bare}")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR and "no chat template" in missing.stderr.str()
    given, path = run_suite(
        "--limit=1", "--val-n=1", "--max-tokens=4", f"--model-path={bare}", f"--chat-template={template}"
    )
    assert given.ret in (0, 1), given.stderr.str()
    records, (summary,) = read_results(path)
    assert summary["complete"] is True and len(records) == 1


def test_same_seeds_same_retool_generations_with_and_without_xdist(run_suite, hf_checkpoint: Path) -> None:
    args = (
        "--mode=retool",
        "--limit=2",
        "--val-n=2",
        "--max-assistant-tokens=16",
        "--agenteval-no-cache",  # both runs really generate
        f"--model-path={hf_checkpoint}",
    )
    serial, one = run_suite(*args, out="serial.jsonl")
    parallel, two = run_suite(*args, "-n", "2", out="parallel.jsonl")
    assert serial.ret == parallel.ret and serial.ret in (0, 1)
    assert _generations(one) == _generations(two)
    assert len({t for *_, t, _ in _generations(one)}) == 4
    for path in (one, two):
        _, (summary,) = read_results(path)
        assert summary["requests"]["cached_generations"] == 0 and summary["complete"] is True
        assert summary["model"]["backend"] == "transformers" and summary["continuation"] == {"tokens": 4}
        (counting,) = summary["token_counting"]
        assert counting.startswith("the checkpoint's own tokenizer and chat template")
        # the first turn of each problem is one batch of its 2 samples, on either worker count
        assert summary["backend"]["batched_rows"] - summary["backend"]["batches"] == 2


def _adapter_copy(source: Path, folder: Path, base: str | None) -> Path:
    shutil.copytree(source, folder)
    config = json.loads((folder / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = base
    (folder / "adapter_config.json").write_text(json.dumps(config))
    return folder


def _one_line(result: pytest.RunResult, message: str) -> None:
    output = result.stdout.str() + result.stderr.str()
    assert message in output, output
    assert "Traceback" not in output, output
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_bad_model_folders_give_one_line(
    aime_suite: pytest.Pytester, tiny_aime: Path, hf_checkpoint: Path, live_adapter: Path
) -> None:
    data = f"--dataset-path={tiny_aime}"

    def run(*args: str) -> pytest.RunResult:  # start-up refusals: in this process
        return aime_suite.runpytest_inprocess(*args)

    nameless = _adapter_copy(live_adapter, aime_suite.path / "nameless", None)
    result = run("-p", "no:cacheprovider", data, f"--model-path={nameless}")
    _one_line(
        result, f"--model-path {nameless}: the adapter names no base_model_name_or_path; pass --base-model"
    )

    other = aime_suite.path / "other-base"
    other.mkdir()
    (other / "config.json").write_text("{}")
    result = run("-p", "no:cacheprovider", data, f"--model-path={live_adapter}", f"--base-model={other}")
    _one_line(
        result, f"--base-model {other} differs from the adapter's base_model_name_or_path {hf_checkpoint}"
    )

    result = run(
        "-p", "no:cacheprovider", data, f"--model-path={hf_checkpoint}", f"--base-model={hf_checkpoint}"
    )
    _one_line(result, "--base-model is for adapter folders")

    broken = _adapter_copy(live_adapter, aime_suite.path / "broken", str(hf_checkpoint))
    (broken / "adapter_model.safetensors").write_bytes(b"not a safetensors file")
    result = run("-p", "no:cacheprovider", data, f"--model-path={broken}")
    _one_line(result, f"--model-path {broken}: transformers/peft cannot load it on {hf_checkpoint}")

    bare = aime_suite.path / "bare"  # a checkpoint folder without tokenizer or chat template
    bare.mkdir()
    shutil.copy(hf_checkpoint / "config.json", bare / "config.json")
    (bare / "model.safetensors").symlink_to(hf_checkpoint / "model.safetensors")
    result = run("-p", "no:cacheprovider", data, f"--model-path={bare}")
    _one_line(result, f"--model-path {bare}: no chat template in the checkpoint")
    (bare / "chat_template.jinja").write_text("{{ messages[0]['content'] }}")  # a template, no tokenizer
    result = run("-p", "no:cacheprovider", data, f"--model-path={bare}")
    _one_line(result, f"--model-path {bare}: no tokenizer.json there")


def test_missing_torch_names_the_install_command(
    aime_suite: pytest.Pytester, tiny_aime: Path, hf_checkpoint: Path
) -> None:
    # torch cannot be uninstalled under the test: its import is made to fail instead. In this
    # process: pytester puts sys.modules back as it was (the real torch) when the run ends
    aime_suite.makeconftest("import sys\nsys.modules['torch'] = None\n")
    result = aime_suite.runpytest_inprocess(
        "-p", "no:cacheprovider", f"--dataset-path={tiny_aime}", f"--model-path={hf_checkpoint}"
    )
    _one_line(result, "the transformers backend cannot import torch")
    assert "pip install torch==2.13.0" in result.stdout.str() + result.stderr.str()
    assert sys.modules["torch"] is torch  # the run's None did not outlive it
