"""What `choose_model` hands the backends (the interface agreed with the transformers
backend) and the start-up lines for bad --model-path / --serve values."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agenteval.models import ModelChoice, choose_model
from pytest_agenteval.models.serve.launcher import LaunchError
from pytest_agenteval.models.serve.resolve import resolve_model_path
from pytest_agenteval.models.serve.session import pick_backend

from .test_resolve import make_adapter, make_checkpoint


def test_a_checkpoint_without_a_server_is_the_transformers_backend(tmp_path: Path) -> None:
    folder = make_checkpoint(tmp_path / "ckpt")
    assert choose_model(str(folder), (), None) == ModelChoice("transformers", path=folder, base=None)


def test_an_adapter_carries_its_base_for_the_transformers_backend(tmp_path: Path) -> None:
    base = make_checkpoint(tmp_path / "base")
    lora = make_adapter(tmp_path / "lora", None)
    choice = choose_model(str(lora), (), None, base_model=str(base))
    assert choice == ModelChoice("transformers", path=lora, base=base)
    assert choice.label == "lora"


def test_serve_auto_without_vllm_or_a_gpu_falls_back_to_transformers(tmp_path: Path) -> None:
    model = resolve_model_path(str(make_checkpoint(tmp_path / "ckpt")))
    assert pick_backend(model, "auto") is None  # no vLLM/SGLang here


def test_a_named_server_that_is_not_installed_is_one_line(tmp_path: Path) -> None:
    model = resolve_model_path(str(make_checkpoint(tmp_path / "ckpt")))
    with pytest.raises(LaunchError) as info:
        pick_backend(model, "vllm")
    assert str(info.value) == "--serve-backend vllm: vllm is not installed (pip install vllm)"
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"x")
    with pytest.raises(
        LaunchError, match="^--serve-backend vllm cannot serve a .gguf file; use llama-cpp or auto$"
    ):
        pick_backend(resolve_model_path(str(gguf)), "vllm")
    assert pick_backend(resolve_model_path(str(gguf)), "auto") == "llama-cpp"


def test_base_model_mismatch_stops_the_run_at_start_up(run_suite, tmp_path: Path) -> None:
    base, other = make_checkpoint(tmp_path / "base"), make_checkpoint(tmp_path / "other")
    lora = make_adapter(tmp_path / "lora", str(base))
    result, _ = run_suite(f"--model-path={lora}", f"--base-model={other}")
    assert result.ret == 4
    assert [x for x in result.stderr.lines if x.startswith("ERROR:")] == [
        (
            f"ERROR: --base-model {other} differs from the adapter's base_model_name_or_path {base}; "
            "pass the base the adapter was trained on (or fix adapter_config.json)"
        )
    ]


def test_bad_serve_gpus_is_a_start_up_line(run_suite) -> None:
    result, _ = run_suite("--serve", "--serve-gpus=0-2", "--serve-tp=2")
    assert result.ret == 4
    assert [x for x in result.stderr.lines if x.startswith("ERROR:")] == [
        (
            "ERROR: --serve-gpus 0-2 has 3 devices, not a multiple of --serve-tp 2; "
            "give a multiple or change --serve-tp"
        )
    ]


def test_serve_refuses_remote_workers_it_cannot_reach(run_suite) -> None:
    tx = "ssh=nobody@remote.invalid//python=python3"
    result, _ = run_suite("--serve", "--tx", tx, "--dist=load")
    assert result.ret == 4
    assert [x for x in result.stderr.lines if x.startswith("ERROR:")] == [
        f"ERROR: --serve launches on this machine's 127.0.0.1, which the remote worker --tx {tx} cannot "
        "reach; start a server every host can reach and pass --endpoint URL instead"
    ]


@pytest.mark.parametrize("model_path", ["replay:old.jsonl", "trio://run/sampler_weights/5", "tinker://x"])
def test_serve_with_a_path_no_server_takes_is_one_line(run_suite, model_path: str) -> None:
    result, _ = run_suite("--serve", f"--model-path={model_path}", "--base-model=B")
    assert result.ret == 4
    assert [x for x in result.stderr.lines if x.startswith("ERROR:")] == [
        f"ERROR: --serve launches a server for a .gguf, checkpoint, adapter or hub id, not for "
        f"--model-path {model_path}; drop --serve"
    ]


def test_a_hub_id_keeps_its_name_not_its_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from .test_resolve import _hub_cache, use_hub_cache

    snapshot = _hub_cache(tmp_path / "hub", "someone/tiny-model", "0123456789abcdef0123456789abcdef01234567")
    use_hub_cache(monkeypatch, tmp_path / "hub")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    choice = choose_model("someone/tiny-model", (), None)
    assert (choice.kind, choice.path, choice.label) == ("transformers", snapshot, "tiny-model")
