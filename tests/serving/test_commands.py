"""Server command lines as pure functions: vLLM/SGLang cannot run here (no GPU), so their
argv, LoRA ranks, names, replicas and environment are checked exactly."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_agenteval.models.serve.commands import (
    adapter_served_name,
    llama_cpp_command,
    lora_rank_for_vllm,
    parse_gpus,
    replica_devices,
    sglang_command,
    vllm_command,
)
from pytest_agenteval.models.serve.resolve import ResolveError, resolve_model_path

from .test_resolve import make_adapter, make_checkpoint


@pytest.mark.parametrize(
    ("rank", "allowed"), [(1, 1), (4, 8), (8, 8), (16, 16), (24, 32), (320, 320), (500, 512)]
)
def test_lora_rank_rounds_up_to_what_vllm_allows(rank: int, allowed: int) -> None:
    assert lora_rank_for_vllm(rank) == allowed


def test_lora_rank_above_vllms_largest_is_one_line() -> None:
    with pytest.raises(ResolveError) as info:
        lora_rank_for_vllm(600)
    assert str(info.value) == (
        "LoRA rank 600 is above vLLM's largest --max-lora-rank 512; merge the adapter into the base "
        "and pass the merged checkpoint as --model-path"
    )


def test_vllm_command_for_a_checkpoint(tmp_path: Path) -> None:
    model = resolve_model_path(str(make_checkpoint(tmp_path / "ckpt")))
    spec = vllm_command(model, 8123, tp=2)
    assert spec.argv == (
        "vllm", "serve", str(tmp_path / "ckpt"),
        "--served-model-name", model.served_name,
        "--host", "127.0.0.1", "--port", "8123",
        "--generation-config", "vllm",
        "--tensor-parallel-size", "2",
    )  # fmt: skip
    assert spec.key_env == "VLLM_API_KEY"  # the key goes through the environment, never argv
    assert dict(spec.sampling_defaults) == {"top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0}
    assert spec.url == "http://127.0.0.1:8123/v1"


def test_vllm_command_serves_adapters_beside_their_base(tmp_path: Path) -> None:
    base_dir = make_checkpoint(tmp_path / "base")
    adapter = resolve_model_path(str(make_adapter(tmp_path / "my-lora", str(base_dir), rank=24)))
    spec = vllm_command(adapter, 9000)
    assert adapter.base is not None
    name = adapter_served_name(adapter)
    assert name == "my-lora-" + adapter.files["adapter_model.safetensors"][:8]
    tail = list(spec.argv[spec.argv.index("--enable-lora") :])
    assert tail == [
        "--enable-lora",
        "--max-lora-rank", "32",
        "--max-loras", "1",
        "--lora-modules",
        json.dumps({"name": name, "path": str(tmp_path / "my-lora"),
                    "base_model_name": adapter.base.served_name}),
    ]  # fmt: skip
    assert spec.argv[2] == str(base_dir)  # the server loads the base
    assert spec.served_name == adapter.base.served_name
    assert dict(spec.adapters) == {name: str(tmp_path / "my-lora")}


def test_gpu_lists_and_replicas() -> None:
    assert parse_gpus("0-3,6,2") == ["0", "1", "2", "3", "6"]
    assert replica_devices("0-7", 2) == ["0,1", "2,3", "4,5", "6,7"]
    assert replica_devices(None, 4) == [None]
    with pytest.raises(ValueError, match=r"^--serve-gpus 0-2 has 3 devices, not a multiple of --serve-tp 2"):
        replica_devices("0-2", 2)
    with pytest.raises(ValueError, match="write device ids like 0-7"):
        parse_gpus("a-b")


def test_replicas_get_their_own_devices_and_internal_ports(tmp_path: Path) -> None:
    model = resolve_model_path(str(make_checkpoint(tmp_path / "ckpt")))
    environ = dict(os.environ)
    specs = [
        vllm_command(model, 8000 + i, tp=2, devices=devices, internal_port=9000 + i)
        for i, devices in enumerate(replica_devices("0-3", 2))
    ]
    assert [dict(s.env) for s in specs] == [
        {"CUDA_VISIBLE_DEVICES": "0,1", "VLLM_PORT": "9000"},
        {"CUDA_VISIBLE_DEVICES": "2,3", "VLLM_PORT": "9001"},
    ]
    assert specs[0].args_hash() != specs[1].args_hash()  # different devices: not interchangeable
    assert dict(os.environ) == environ  # the devices go to the child only


def test_args_hash_ignores_the_port_but_not_the_model(tmp_path: Path) -> None:
    a = resolve_model_path(str(make_checkpoint(tmp_path / "a")))
    b = resolve_model_path(str(make_checkpoint(tmp_path / "b", weights=b"other")))
    assert vllm_command(a, 8000).args_hash() == vllm_command(a, 8111).args_hash()
    assert vllm_command(a, 8000).args_hash() != vllm_command(b, 8000).args_hash()


def test_sglang_runs_keyless_since_it_takes_its_key_only_on_argv(tmp_path: Path) -> None:
    model = resolve_model_path(str(make_checkpoint(tmp_path / "ckpt")))
    spec = sglang_command(model, 7000, tp=1)
    assert spec.argv[1:3] == ("-m", "sglang.launch_server")
    assert spec.key_env is None and "--api-key" not in spec.argv
    assert spec.argv[spec.argv.index("--served-model-name") + 1] == model.served_name


def test_llama_cpp_command_turns_off_its_hidden_sampling_defaults(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"x")
    model = resolve_model_path(str(gguf))
    spec = llama_cpp_command(model, 5555, n_threads=1, n_ctx=2048)
    assert spec.argv[1:] == (
        "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", model.served_name,
        "--host", "127.0.0.1", "--port", "5555",
        "--n_threads", "1", "--n_threads_batch", "1", "--n_ctx", "2048",
    )  # fmt: skip
    assert dict(spec.sampling_defaults) == {"min_p": 0.0, "repeat_penalty": 1.0, "top_k": 0}
    assert spec.key_env == "API_KEY"


def test_several_adapters_share_one_vllm_server(tmp_path: Path) -> None:
    base_dir = make_checkpoint(tmp_path / "base")
    small = resolve_model_path(str(make_adapter(tmp_path / "r4", str(base_dir), rank=4)))
    large = resolve_model_path(str(make_adapter(tmp_path / "r24", str(base_dir), rank=24)))
    spec = vllm_command(small, 9000, adapters=[small, large])
    argv = list(spec.argv)
    assert argv[argv.index("--max-lora-rank") + 1] == "32"  # the largest r (24), rounded up
    assert argv[argv.index("--max-loras") + 1] == "2"
    modules = [json.loads(x) for x in argv[argv.index("--lora-modules") + 1 :]]
    assert [m["path"] for m in modules] == [str(tmp_path / "r4"), str(tmp_path / "r24")]
    assert list(spec.adapters) == [adapter_served_name(small), adapter_served_name(large)]


@pytest.mark.parametrize(
    ("model_type", "parser"), [("qwen3", "hermes"), ("llama", "llama3_json"), ("mistral", "mistral")]
)
def test_vllm_gets_the_tool_parser_of_the_model_family(tmp_path: Path, model_type: str, parser: str) -> None:
    model = resolve_model_path(str(make_checkpoint(tmp_path / "ckpt", model_type=model_type)))
    argv = list(vllm_command(model, 8000).argv)
    assert argv[argv.index("--enable-auto-tool-choice") :] == [
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        parser,
    ]


def test_an_unknown_family_gets_no_tool_parser(tmp_path: Path) -> None:
    model = resolve_model_path(str(make_checkpoint(tmp_path / "ckpt", model_type="gpt_bigcode")))
    assert "--enable-auto-tool-choice" not in vllm_command(model, 8000).argv


def test_an_adapter_run_requests_the_adapter_not_its_base(tmp_path: Path) -> None:
    """The base is served beside the adapter; asking for the base would evaluate the base."""
    from pytest_agenteval.models.serve.launcher import LaunchedServer
    from pytest_agenteval.models.serve.session import Launch

    base_dir = make_checkpoint(tmp_path / "base")
    adapter = resolve_model_path(str(make_adapter(tmp_path / "my-lora", str(base_dir))))
    spec = vllm_command(adapter, 9000)
    launch = Launch(adapter, [LaunchedServer(spec, tmp_path / "log", None, 0)], "my-lora")
    assert launch.workerinput()["model_name"] == adapter_served_name(adapter) != spec.served_name
    base = resolve_model_path(str(base_dir))
    plain = Launch(base, [LaunchedServer(vllm_command(base, 9001), tmp_path / "log", None, 0)], "base")
    assert plain.workerinput()["model_name"] == base.served_name
