"""The vLLM and SGLang stand-ins (pytest_agenteval/testing/standins): their flag lists,
their command lines as real processes, and the launcher's real code (`session.start`,
`launcher.launch`) running them unchanged. Their HTTP surface in process is in
test_standins_http.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_agenteval.models.http.probe import request_json
from pytest_agenteval.models.serve.commands import adapter_served_name, sglang_command, vllm_command
from pytest_agenteval.models.serve.launcher import LaunchError, launch
from pytest_agenteval.models.serve.probe import greedy_logprobs
from pytest_agenteval.models.serve.resolve import ResolvedModel, resolve_model_path
from pytest_agenteval.models.serve.session import Launch, pick_backend, server_notes, start
from pytest_agenteval.testing.standins import Standins, install
from pytest_agenteval.testing.standins.argv import flag_list, parse_sglang, parse_vllm
from pytest_agenteval.testing.standins.devices import DeviceError, claim, visible_devices
from tests.conftest import read_results

LOG = "AGENTEVAL_STANDIN_LOG"


def checkpoint(folder: Path, generation: dict | None = None) -> Path:
    """What the resolver asks of a checkpoint: config.json, a weight file, a chat template."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3", "max_position_embeddings": 4096}))
    (folder / "model.safetensors").write_bytes(folder.name.encode())  # never read as weights
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    if generation is not None:
        (folder / "generation_config.json").write_text(json.dumps(generation))
    return folder


def lora(folder: Path, base: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(base), "r": 8}))
    (folder / "adapter_model.safetensors").write_bytes(folder.name.encode())
    return folder


def settings(**extra) -> SimpleNamespace:
    values = dict(serve_gpus=None, serve_tp=1, serve_args=[], serve_timeout=30.0, serve_keep=False)
    return SimpleNamespace(**{**values, "strict": False, "llama_threads": 1, "n_ctx": 512, **extra})


@pytest.fixture(scope="module")
def standins(tmp_path_factory: pytest.TempPathFactory) -> Standins:
    return install(tmp_path_factory.mktemp("standins"), gpus=2)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[ResolvedModel, ResolvedModel]:
    """A base (whose generation_config.json would change sampling) and a LoRA on it."""
    root = tmp_path_factory.mktemp("ckpt")
    base = checkpoint(root / "base", {"temperature": 0.6, "top_p": 0.95})
    adapter = lora(root / "step-800-lora", base)
    return resolve_model_path(str(base)), resolve_model_path(str(adapter))


@pytest.fixture
def on_path(standins: Standins, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The stand-ins first on PATH and PYTHONPATH (this process's too); their request log."""
    for name, value in standins.env().items():
        if name in ("PATH", "PYTHONPATH"):
            monkeypatch.setenv(name, value)
    monkeypatch.syspath_prepend(str(standins.folder))
    log = tmp_path / "requests.jsonl"
    monkeypatch.setenv(LOG, str(log))
    return log


def run(standins: Standins, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**standins.env(), **env}
    return subprocess.run(argv, capture_output=True, text=True, env=full, timeout=60)


def log_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# -- the flag lists -----------------------------------------------------------------------
def test_the_flag_lists_name_their_version_and_source_file() -> None:
    vllm_header, vllm_flags = flag_list("vllm-0.34.0")
    sglang_header, sglang_flags = flag_list("sglang-0.5.23")
    assert vllm_header[0].startswith("vLLM 0.34.0: every option of `vllm serve`")
    assert "vllm/entrypoints/common/cli_args.py" in " ".join(vllm_header)
    assert "vllm/engine/arg_utils.py" in " ".join(vllm_header)
    assert sglang_header[0].startswith("SGLang 0.5.23: every option of `python -m sglang.launch_server`")
    assert "python/sglang/srt/server_args.py" in " ".join(sglang_header)
    assert (len(vllm_flags), len(sglang_flags)) == (327, 531)


# the options the launcher writes, and how many values each takes in the pinned versions
VLLM_ARITY = {
    "--served-model-name": "+", "--host": "1", "--port": "1", "--generation-config": "1",
    "--tensor-parallel-size": "1", "--chat-template": "1", "--enable-auto-tool-choice": "0",
    "--tool-call-parser": "1", "--enable-lora": "0", "--max-lora-rank": "1", "--max-loras": "1",
    "--lora-modules": "+", "--api-key": "+", "--reasoning-parser": "1", "--max-model-len": "1",
}  # fmt: skip
SGLANG_ARITY = {
    "--model-path": "1", "--served-model-name": "1", "--host": "1", "--port": "1", "--tp-size": "1",
    "--chat-template": "1", "--enable-lora": "0", "--max-lora-rank": "1", "--lora-paths": "*",
    "--api-key": "1", "--reasoning-parser": "1", "--sampling-defaults": "1", "--context-length": "1",
}  # fmt: skip


@pytest.mark.parametrize(("name", "arity"), [("vllm-0.34.0", VLLM_ARITY), ("sglang-0.5.23", SGLANG_ARITY)])
def test_the_options_the_launcher_writes_take_these_values(name: str, arity: dict[str, str]) -> None:
    found = {s: f.nargs for f in flag_list(name)[1] for s in f.strings if s in arity}
    assert found == arity


def test_the_launchers_own_command_lines_parse(models: tuple[ResolvedModel, ResolvedModel]) -> None:
    base, adapter = models
    spec = vllm_command(base, 8123, adapters=[adapter], tp=2, extra=("--max-model-len", "2048"))
    assert spec.argv[0] == "vllm"
    args = parse_vllm(list(spec.argv[1:]))
    assert (args.model_tag, args.served_model_name, args.port) == (str(base.path), [base.served_name], "8123")
    assert (args.tensor_parallel_size, args.generation_config, args.max_model_len) == ("2", "vllm", "2048")
    assert args.enable_lora and args.enable_auto_tool_choice and args.tool_call_parser == "hermes"
    assert [json.loads(m)["name"] for m in args.lora_modules] == [adapter_served_name(adapter)]
    spec = sglang_command(base, 8124, adapters=[adapter], tp=2)
    assert spec.argv[1:3] == ("-m", "sglang.launch_server")
    args = parse_sglang(list(spec.argv[3:]))
    assert (args.model_path, args.served_model_name, args.tp_size) == (str(base.path), base.served_name, "2")
    assert args.lora_paths == [f"{adapter_served_name(adapter)}={adapter.path}"]


def test_an_unknown_flag_exits_2_as_the_real_cli_says_it(standins: Standins) -> None:
    # what vLLM 0.34.0 and SGLang 0.5.23 print (their real parsers, run once to record it)
    done = run(standins, "vllm", "serve", "/m", "--port", "5", "--bogus-flag", "3")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "usage: vllm [-h] [-v]",
        "            {chat,complete,serve,launch,bench,collect-env,download-kernels,preload,run-batch,"
        "snapshot}",
        "            ...",
        "vllm: error: unrecognized arguments: --bogus-flag 3",
    ]


def test_a_bad_value_or_option_exits_2_with_argparse_s_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_vllm(["serve", "/m", "--max_model_len", "5", "--port"])  # vLLM takes _ for -
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines()[-2:] == [
        "usage: vllm serve [model_tag] [options]",
        "vllm serve: error: argument --port: expected one argument",
    ]
    with pytest.raises(SystemExit) as exited:
        parse_vllm(["serve", "/m", "--max-lora-rank", "24"])
    assert capsys.readouterr().err.splitlines()[-1] == (
        "vllm serve: error: argument --max-lora-rank: invalid choice: '24' "
        "(choose from '1', '8', '16', '32', '64', '128', '256', '320', '512')"
    )
    with pytest.raises(SystemExit) as exited:
        parse_sglang(["--model-path", "/m", "--bogus"])
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("usage: sglang serve [-h] --model-path MODEL_PATH")
    assert err[-1] == "sglang serve: error: unrecognized arguments: --bogus"
    switches = parse_vllm(["serve", "/m", "--enable-lora", "--disable-auto-tool-choice", "-ep"])
    assert (switches.enable_lora, switches.enable_auto_tool_choice, switches.enable_expert_parallel) == (
        True,
        False,
        True,
    )


def test_install_writes_what_the_launcher_looks_for(standins: Standins) -> None:
    assert sorted(p.name for p in standins.bin.iterdir()) == ["nvidia-smi", "vllm"]
    env = standins.env({"PATH": "/usr/bin", "PYTHONPATH": ""})
    assert env["PATH"] == f"{standins.bin}{os.pathsep}/usr/bin"
    assert env["PYTHONPATH"] == str(standins.folder)
    code = (
        "import importlib.metadata as m, importlib.util as u; "
        "print(m.version('vllm'), m.version('sglang'), bool(u.find_spec('sglang.launch_server')))"
    )
    done = run(standins, sys.executable, "-c", code)
    assert done.stdout.split() == ["0.34.0+agenteval.standin", "0.5.23+agenteval.standin", "True"]
    done = run(standins, "nvidia-smi", "--query-gpu=index,name,memory.used", "--format=csv,noheader")
    assert done.stdout.splitlines() == ["0, NVIDIA H100 80GB HBM3, 0 MiB", "1, NVIDIA H100 80GB HBM3, 0 MiB"]


def test_the_command_line_writes_the_folder(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest_agenteval.testing.standins", str(tmp_path / "s"), "--gpus", "3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1] == f"  . {tmp_path / 's' / 'env.sh'}"
    assert json.loads((tmp_path / "s" / "standin.json").read_text()) == {"gpus": 3, "delay_s": 0.0}
    assert (tmp_path / "s" / "bin" / "vllm").stat().st_mode & 0o111


# -- the launcher's real code on them -------------------------------------------------------
@pytest.fixture(scope="module")
def vllm_run(
    standins: Standins, models: tuple[ResolvedModel, ResolvedModel], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Launch, Path]]:
    """`session.start` of a LoRA on GPU 1: vLLM with the base beside the adapter."""
    folder = tmp_path_factory.mktemp("vllm-run")
    log = folder / "requests.jsonl"
    with pytest.MonkeyPatch.context() as mp:
        for name, value in standins.env().items():
            mp.setenv(name, value)
        mp.setenv(LOG, str(log))
        mp.setenv("AGENTEVAL_STANDIN_DELAY_S", "0.5")  # loading weights, as the launcher sees it
        mp.delenv("VLLM_API_KEY", raising=False)
        mp.syspath_prepend(str(standins.folder))
        assert pick_backend(models[1], "auto") == "vllm"  # importable vllm and an nvidia-smi: a GPU host
        lines: list[str] = []
        launched = start(settings(serve_gpus="1"), models[1], "vllm", folder, folder, lines.append)
    try:
        yield launched, log
    finally:
        assert launched.stop() == []


def test_vllm_serves_the_base_and_its_lora_as_the_launcher_asked(
    vllm_run: tuple[Launch, Path], models: tuple[ResolvedModel, ResolvedModel]
) -> None:
    launched, log = vllm_run
    base, adapter = models
    url, key = launched.endpoints[0], launched.key
    assert launched.request_name == adapter_served_name(adapter)
    assert launched.probe is not None and launched.probe["live"]  # the LoRA's logprobs are its own
    assert launched.servers[0].version == "0.34.0+agenteval.standin"
    assert launched.servers[0].ready_s >= 0.5  # AGENTEVAL_STANDIN_DELAY_S
    status, listed = request_json(f"{url}/models", api_key=key)
    assert status == 200
    assert [(m["id"], m["root"], m["parent"], m["max_model_len"]) for m in listed["data"]] == [
        (base.served_name, str(base.path), None, 4096),
        (adapter_served_name(adapter), str(adapter.path), base.served_name, None),
    ]
    assert request_json(f"{url}/models", api_key=None)[0] == 401  # the key from VLLM_API_KEY
    # the probe's two completions, told apart by their model field
    assert [(x["model"], x["path"]) for x in log_lines(log)] == [
        (base.served_name, "/v1/completions"),
        (adapter_served_name(adapter), "/v1/completions"),
    ]
    # --generation-config vllm: the checkpoint's generation_config.json is not applied
    assert server_notes(launched.servers[0].log_path) == []


def test_the_held_gpu_is_busy_for_another_server_and_shown_by_nvidia_smi(
    vllm_run: tuple[Launch, Path],
    standins: Standins,
    models: tuple[ResolvedModel, ResolvedModel],
    tmp_path: Path,
) -> None:
    done = run(standins, "nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits")
    assert done.stdout.splitlines() == ["0, 0", "1, 73400"]
    spec = vllm_command(models[0], 0, devices="1")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", standins.env()["PATH"])
        with pytest.raises(LaunchError, match="less than desired GPU memory utilization") as caught:
            launch(spec, tmp_path / "busy.log", timeout_s=30)
    assert "GPU 1 is held by stand-in pid" in str(caught.value)


@pytest.mark.parametrize(
    ("visible", "devices"),
    [(None, [0, 1]), ("1", [1]), ("1,0", [1, 0]), ("", []), ("7", []), ("0,7,1", [0]), ("GPU-0", [])],
)
def test_cuda_visible_devices_reads_as_cuda_reads_it(visible: str | None, devices: list[int]) -> None:
    assert visible_devices(2, {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}) == devices


@pytest.mark.parametrize(
    ("visible", "expected"),
    [
        ("", "No CUDA GPUs are available"),
        ("0", "World size (2) is larger than the number of available GPUs (1)"),
    ],
)
def test_too_few_devices_fail_as_vllm_fails(standins: Standins, visible: str, expected: str) -> None:
    with pytest.raises(DeviceError, match=re.escape(expected)):
        claim(standins.folder, 2, {"CUDA_VISIBLE_DEVICES": visible})


def test_a_server_without_devices_exits_1_with_vllm_s_line(
    standins: Standins, models: tuple[ResolvedModel, ResolvedModel]
) -> None:
    done = run(standins, "vllm", "serve", str(models[0].path), "--port", "0", CUDA_VISIBLE_DEVICES="")
    assert done.returncode == 1
    assert "RuntimeError: No CUDA GPUs are available" in done.stdout.splitlines()


def test_a_fatal_error_in_the_log_fails_the_start_at_once(
    standins: Standins, models: tuple[ResolvedModel, ResolvedModel], tmp_path: Path
) -> None:
    spec = vllm_command(models[0], 0, devices="0")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", standins.env()["PATH"])
        mp.setenv("AGENTEVAL_STANDIN_FATAL", "oom-hang")  # the engine hangs on: the log line decides
        with pytest.raises(LaunchError) as hung:
            launch(spec, tmp_path / "hang.log", timeout_s=30)
    assert "reported a fatal error before it was ready (CUDA out of memory)" in str(hung.value)


def test_sglang_lists_its_lora_and_selects_it_only_as_base_colon_adapter(
    standins: Standins, models: tuple[ResolvedModel, ResolvedModel], tmp_path: Path
) -> None:
    """The launcher asks SGLang for `base:adapter`: the bare adapter name was answered by the
    base, silently in a sweep (its request name), with a warning from the probe otherwise."""
    base, adapter = models
    log = tmp_path / "requests.jsonl"
    with pytest.MonkeyPatch.context() as mp:
        for name, value in standins.env().items():
            mp.setenv(name, value)
        mp.setenv(LOG, str(log))
        lines: list[str] = []
        launched = start(settings(serve_gpus="0"), adapter, "sglang", tmp_path, tmp_path, lines.append)
    try:
        url, name = launched.endpoints[0], adapter_served_name(adapter)
        listed = request_json(f"{url}/models")[1]["data"]
        assert [(m["id"], m["root"], m["parent"]) for m in listed] == [
            (base.served_name, base.served_name, None),  # SGLang's root is the served name
            (name, str(adapter.path), base.served_name),
        ]
        # SGLang 0.5.23 (serving_base.py _parse_model_parameter) takes any model name for the
        # base and picks a LoRA only from `base:adapter`
        assert greedy_logprobs(url, None, name) == greedy_logprobs(url, None, base.served_name)
        assert greedy_logprobs(url, None, f"{base.served_name}:{name}") != greedy_logprobs(url, None, name)
        assert launched.request_name == f"{base.served_name}:{name}"
        assert launched.probe is not None and launched.probe["live"]  # the LoRA's logprobs are its own
        assert not any("gives the same greedy logprobs as its base" in line for line in lines)
        assert [x["model"] for x in log_lines(log)][:2] == [base.served_name, f"{base.served_name}:{name}"]
        # SGLang applies generation_config.json unless --sampling-defaults openai
        assert server_notes(launched.servers[0].log_path) == []  # its words are not the notes' markers
        assert "Using default chat sampling params from model generation config" in (
            launched.servers[0].log_path.read_text()
        )
    finally:
        assert launched.stop() == []


def test_a_sweeps_lora_on_sglang_is_asked_for_as_base_colon_adapter_and_probed(
    standins: Standins, models: tuple[ResolvedModel, ResolvedModel], tmp_path: Path
) -> None:
    """A sweep's request name for a LoRA on SGLang (its placeholder's too, for a later wave)
    is `base:adapter`; its server's start runs the adapter-is-live probe, as --serve does for
    one model (a sweep never ran it: a LoRA answered by its base went unnoticed)."""
    from pytest_agenteval.config.settings import Settings
    from pytest_agenteval.models.serve.sweep_launch import SweepServers

    base, adapter = models
    said: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        for name, value in standins.env().items():
            mp.setenv(name, value)
        mp.syspath_prepend(str(standins.folder))
        settings = Settings(serve=True, serve_backend="sglang", serve_gpus="0", serve_timeout=30.0)
        servers = SweepServers(settings, {"base": base, "lora": adapter}, tmp_path, tmp_path, said.append)
        wanted = f"{base.served_name}:{adapter_served_name(adapter)}"
        assert servers.request_name("lora") == servers.placeholder("lora")["model_name"] == wanted
        assert servers.request_name("base") == base.served_name
        try:
            servers.start_ready()
            probe = servers.record("lora").adapter_probe
            assert probe is not None and probe["live"] and probe["adapter"] == wanted
            assert servers.record("base").adapter_probe is None
            assert not any("WARNING" in line for line in said)
        finally:
            assert servers.close() == []


def test_pytest_serve_on_a_checkpoint_runs_vllm_s_code_path_on_the_stand_in(
    on_path: Path, run_suite, tmp_path: Path
) -> None:
    """What a user runs on the GPU machine, rehearsed: `pytest suites/aime25 --model-path
    CKPT --serve`, the backend chosen as on a GPU host (vLLM importable, an nvidia-smi)."""
    ckpt = checkpoint(tmp_path / "step-800")
    result, out = run_suite("--serve", f"--model-path={ckpt}", "--val-n=2", "--max-tokens=64")
    problems, (summary,) = read_results(out)
    served = summary["model"]["served"]
    (replica,) = served["replicas"]
    assert replica["command"].startswith(f"vllm serve {ckpt} --served-model-name agenteval-")
    assert replica["version"] == "0.34.0+agenteval.standin"
    assert summary["model"]["display"] == "step-800 (vllm, launched)"
    requests = log_lines(on_path)
    assert len(requests) == 2 * len(problems) == summary["requests"]["generations"]
    assert {(r["model"], r["path"]) for r in requests} == {(summary["model"]["name"], "/v1/chat/completions")}
    assert {(r["body"]["top_k"], r["body"]["min_p"], r["body"]["repetition_penalty"]) for r in requests} == {
        (-1, 0.0, 1.0)  # the defaults the launcher sends with every request
    }
