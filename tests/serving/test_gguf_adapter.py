"""A GGUF LoRA adapter (`general.type=adapter`) as `--model-path` with its gguf base in
`--base-model`: in-process through llama-cpp-python's `lora_path`, and launched as
`python -m llama_cpp.server --model BASE --lora_path ADAPTER`. Real files (made by
testing/models.py), real llama.cpp, real server processes."""

from __future__ import annotations

import asyncio
import json
import shlex
import shutil
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_agenteval.api.sampler import SamplingParams
from pytest_agenteval.models import ModelChoice, choose_model, make_sampler
from pytest_agenteval.models.backends.llama import embedded_model_path
from pytest_agenteval.models.serve.commands import llama_cpp_command
from pytest_agenteval.models.serve.launcher import free_port, launch, stop
from pytest_agenteval.models.serve.resolve import resolve_model_path
from pytest_agenteval.models.serve.session import pick_backend

pytest.importorskip("gguf", reason="the adapter maker needs the gguf package (pip install gguf)")

QUESTION = [{"role": "user", "content": "What is 2+3? Answer briefly."}]
GREEDY = SamplingParams(temperature=0.0, top_p=1.0, top_k=0, max_tokens=16, seed=0)


def settings(**extra):
    values = dict(llama_threads=1, n_ctx=512, out=None, thinking="omit")
    return SimpleNamespace(**{**values, **extra})


def greedy(choice: ModelChoice) -> str:
    sampler = make_sampler(choice, settings(), 1)

    async def ask() -> str:
        try:
            return (await sampler.complete(QUESTION, GREEDY)).text
        finally:
            await sampler.aclose()

    return asyncio.run(ask())


@pytest.fixture(scope="module")
def plain_answer() -> str:
    """The embedded gguf's greedy answer in process: loaded once for the module's tests."""
    return greedy(ModelChoice("gguf", path=embedded_model_path()))


def test_an_adapter_gguf_is_chosen_with_its_base(agenteval_gguf_lora: Path) -> None:
    base = embedded_model_path()
    choice = choose_model(str(agenteval_gguf_lora), (), None, base_model=str(base))
    assert choice == ModelChoice("gguf", path=agenteval_gguf_lora, base=base)
    assert choice.label == agenteval_gguf_lora.stem


def test_an_adapter_gguf_without_base_model_is_one_line(agenteval_gguf_lora: Path) -> None:
    with pytest.raises(ValueError) as info:
        choose_model(str(agenteval_gguf_lora), (), None)
    assert str(info.value) == (
        f"--model-path {agenteval_gguf_lora} is a GGUF LoRA adapter (general.type=adapter); "
        "pass --base-model BASE.gguf, the gguf model it was trained on"
    )


def test_a_base_of_another_architecture_is_one_line(agenteval_gguf_lora: Path, tmp_path: Path) -> None:
    # an adapter is no base: another adapter file (a copy, not a second one made from scratch)
    other = Path(shutil.copyfile(agenteval_gguf_lora, tmp_path / "other-lora.gguf"))
    with pytest.raises(ValueError) as info:
        choose_model(str(agenteval_gguf_lora), (), None, base_model=str(other))
    assert str(info.value) == (
        f"--base-model {other}: the base of a GGUF LoRA adapter must be a gguf model "
        "(general.type=model), not adapter"
    )


def test_in_process_the_adapter_changes_greedy_generations(
    agenteval_gguf_lora: Path, plain_answer: str
) -> None:
    base = embedded_model_path()
    plain = plain_answer
    adapted = greedy(ModelChoice("gguf", path=agenteval_gguf_lora, base=base))
    again = greedy(ModelChoice("gguf", path=agenteval_gguf_lora, base=base))
    assert plain == "The answer is 5."
    assert adapted == again  # greedy: the same every time
    assert adapted != plain


def test_the_perturbed_gguf_is_another_model(agenteval_perturbed_gguf: Path, plain_answer: str) -> None:
    plain = plain_answer
    other = greedy(ModelChoice("gguf", path=agenteval_perturbed_gguf))
    assert plain == "The answer is 5."
    assert other not in ("", plain)  # a model that still answers, differently


def test_the_identity_names_both_the_adapter_and_its_base(
    agenteval_gguf_lora: Path, agenteval_perturbed_gguf: Path
) -> None:
    from pytest_agenteval.models.backends.llama import file_fingerprint

    base = embedded_model_path()
    on_base = make_sampler(ModelChoice("gguf", path=agenteval_gguf_lora, base=base), settings(), 1)
    on_other = make_sampler(
        ModelChoice("gguf", path=agenteval_gguf_lora, base=agenteval_perturbed_gguf), settings(), 1
    )
    plain = make_sampler(ModelChoice("gguf", path=base), settings(), 1)
    fingerprints = {s.identity.fingerprint for s in (on_base, on_other, plain)}
    assert len(fingerprints) == 3  # the same adapter on another base is another model
    assert on_base.identity.details["adapter_sha256"] == file_fingerprint(agenteval_gguf_lora)
    assert on_base.identity.details["base_sha256"] == file_fingerprint(base)
    assert on_base.identity.name == agenteval_gguf_lora.stem
    resolved = resolve_model_path(str(agenteval_gguf_lora), base_model=str(base))
    assert resolved.kind == "gguf-adapter"
    assert on_base.identity.fingerprint == resolved.weights_fingerprint  # in-process = launched


def test_a_run_without_base_model_stops_at_start_up(run_suite, agenteval_gguf_lora: Path) -> None:
    result, _ = run_suite(f"--model-path={agenteval_gguf_lora}")
    assert result.ret == 4
    assert [x for x in result.stderr.lines if x.startswith("ERROR:")] == [
        f"ERROR: --model-path {agenteval_gguf_lora} is a GGUF LoRA adapter (general.type=adapter); "
        "pass --base-model BASE.gguf, the gguf model it was trained on"
    ]


def chat(url: str, key: str | None, model: str) -> str:
    body = {"model": model, "messages": QUESTION, "temperature": 0, "max_tokens": 16, "seed": 0}
    body.update(min_p=0.0, repeat_penalty=1.0, top_k=0)
    request = urllib.request.Request(
        f"{url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())["choices"][0]["message"]["content"]


def test_a_launched_server_serves_the_adapter_on_its_base(
    agenteval_gguf_lora: Path, llama_server: str, tmp_path: Path
) -> None:
    pytest.importorskip("uvicorn", reason="the server needs llama-cpp-python[server]")
    base = embedded_model_path()
    adapter = resolve_model_path(str(agenteval_gguf_lora), base_model=str(base))
    assert pick_backend(adapter, "auto") == "llama-cpp"
    # the base's answer from a real llama.cpp server on the same gguf: the session's (no key)
    answers = {"base": chat(llama_server, None, "smollm2")}
    held, port = free_port()
    spec = llama_cpp_command(adapter, port, n_threads=1, n_ctx=512)
    server = launch(spec, tmp_path / "adapter.log", timeout_s=120, held=held)
    try:
        answers["adapter"] = chat(spec.url, server.key, spec.served_name)
    finally:
        stop(server)
    argv = list(llama_cpp_command(adapter, 1, n_threads=1, n_ctx=512).argv)
    assert argv[argv.index("--model") + 1] == str(base)
    assert argv[argv.index("--lora_path") + 1] == str(agenteval_gguf_lora)
    assert answers["base"] == "The answer is 5."
    assert answers["adapter"] != answers["base"]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_run_on_the_adapter_records_it_and_its_base(
    run_suite, agenteval_gguf_lora: Path, workers: list[str]
) -> None:
    from pytest_agenteval.models.backends.llama import file_fingerprint
    from tests.conftest import read_results

    base = embedded_model_path()
    args = (f"--model-path={agenteval_gguf_lora}", f"--base-model={base}", "--max-tokens=8", "--val-n=1")
    result, path = run_suite(*args, "--llama-threads=1", "--n-ctx=512", *workers)
    problems, summaries = read_results(path)
    assert result.ret in (0, 1), result.stderr.str()  # 1: SmolLM2 gets AIME answers wrong
    assert len(problems) == 4 and all(p["generations"] for p in problems)
    model = summaries[0]["model"]
    assert (model["backend"], model["name"], model["path"]) == (
        "gguf",
        agenteval_gguf_lora.stem,
        str(agenteval_gguf_lora),
    )
    assert (model["sha256"], model["base"], model["base_sha256"]) == (
        file_fingerprint(agenteval_gguf_lora),
        str(base),
        file_fingerprint(base),
    )


def test_serve_launches_the_adapter_on_its_base(run_suite, agenteval_gguf_lora: Path) -> None:
    pytest.importorskip("uvicorn", reason="--serve on a gguf needs llama-cpp-python[server]")
    from tests.conftest import read_results

    base = embedded_model_path()
    args = (
        f"--model-path={agenteval_gguf_lora}",
        f"--base-model={base}",
        "--serve",
        "--max-tokens=8",
        "--val-n=1",
    )
    # one process: the launch is the controller's with or without workers, and an adapter
    # served to -n 2 workers is tests/sweep/test_cpu_sweep_serve.py's (served kind gguf-adapter)
    result, path = run_suite(*args, "--llama-threads=1", "--n-ctx=512")
    problems, summaries = read_results(path)
    assert result.ret in (0, 1), result.stderr.str()
    assert len(problems) == 4 and all(p["generations"] for p in problems)
    served = summaries[0]["model"]["served"]
    resolved = resolve_model_path(str(agenteval_gguf_lora), base_model=str(base))
    assert (served["label"], served["fingerprint"]) == (
        agenteval_gguf_lora.stem,
        resolved.weights_fingerprint,
    )
    assert (served["model"]["kind"], served["model"]["base"]["path"]) == ("gguf-adapter", str(base))
    argv = shlex.split(served["replicas"][0]["command"])
    assert argv[argv.index("--model") + 1] == str(base)
    assert argv[argv.index("--lora_path") + 1] == str(agenteval_gguf_lora)
