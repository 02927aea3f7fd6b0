"""The GPU path rehearsed on the CPU (issue 34): `pytest suites/aime25 --serve` over a sweep of
three checkpoints (a base, a LoRA on it, another full checkpoint) with the vLLM and SGLang
stand-ins first on PATH and PYTHONPATH (`python -m pytest_agenteval.testing.standins`), so the
launcher's real vLLM and SGLang code runs, one server at a time (`--serve-max-servers 1`: the
base and its LoRA in wave 1, the other checkpoint in wave 2), in retool mode: `-n 2` where the
workers are the point (the rehearsal as a user runs it, a worker killed), in one process
where a run asks about what is sent (bodies, cache keys, tokens, n, shards, the backend). Each
completion request a stand-in receives is a line of its log (AGENTEVAL_STANDIN_LOG), and the
assertions read those lines: a later wave's model sends what a first wave's sends.

Slow by nature (each run is a pytest controller, run in this process as a process in the
folder would have it, 2 xdist workers where it asks for them, the servers and the sandbox):
3 models x 2 problems x N=2, a scripted answer, and every run made once per module and shared
by the tests that read it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from benchmarks import gpu_sweep_check
from pytest_agenteval.cli import main
from pytest_agenteval.models.serve.probe import PROBE_PROMPT
from pytest_agenteval.testing.standins import install
from tests.conftest import as_a_process, read_results

ROOT = Path(__file__).resolve().parents[2]
BASE, LORA, OTHER = "base", "lora-step-200", "other"
# the base and its LoRA share wave 1's server; `other` waits for wave 2
MODELS = (f"--model-path={BASE}=ckpts/base", "--model-path=ckpts/lora-step-200", "--model-path=ckpts/other")
SWEEP = (
    "--dataset-path=problems.jsonl",
    "--mode=retool",
    "--val-n=2",
    "--sandbox-timeout=10",
    # a prompt of about 1,900 tokens (the stand-in's tokenizer is a token a character): each
    # turn's max_tokens is the room left, as the server's /tokenize counts it
    "--max-trajectory-tokens=2600",
    "--serve",
    "--serve-max-servers=1",
    # what a run sends does not depend on xdist: one process (-n 2 starts two more
    # interpreters, about 3 s of CPU a run); XDIST where workers are what the test asks about
    "-n",
    "0",
)
XDIST = ("-n", "2")  # after SWEEP: the last -n wins
# what the stand-ins answer (a tool call, then the answer from the tool's output): the GPU
# check's, so the rehearsal and a GPU run send the same conversations
ANSWERS = gpu_sweep_check.ANSWERS
# a worker dies (os._exit) once, after the generations of one first-wave item, before its call
CRASH = """
import os
from pathlib import Path

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    yield
    crash, mark = os.environ.get("REHEARSAL_CRASH"), os.environ.get("REHEARSAL_CRASH_MARK")
    if crash and mark and item.nodeid.endswith(crash) and not Path(mark).exists():
        Path(mark).write_text("crashed")
        os._exit(1)
"""


def _checkpoint(folder: Path, weights: bytes) -> None:
    """What the resolver asks of a checkpoint: config.json, a weight file, a chat template
    (the stand-in never reads the weights)."""
    folder.mkdir(parents=True)
    config = {"model_type": "qwen3", "max_position_embeddings": 4096}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "chat_template.jinja").write_text("{{ messages }}", encoding="utf-8")


class Rehearsal:
    """The rehearsal's folder and its runs, each made once (by name) and kept."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.standins = install(folder / "standins", 2)
        _checkpoint(folder / "ckpts" / "base", b"base weights")
        _checkpoint(folder / "ckpts" / "other", b"other weights")
        lora = folder / "ckpts" / "lora-step-200"
        lora.mkdir()
        adapter = {"base_model_name_or_path": str(folder / "ckpts" / "base"), "r": 8, "peft_type": "LORA"}
        (lora / "adapter_config.json").write_text(json.dumps(adapter), encoding="utf-8")
        (lora / "adapter_model.safetensors").write_bytes(b"lora weights")
        rows = [{"id": i, "problem": f"What is {i} + {70 - i}?", "answer": "70"} for i in (1, 2)]
        (folder / "problems.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
        (folder / "rehearsal_answers.py").write_text(ANSWERS, encoding="utf-8")
        (folder / "conftest.py").write_text(CRASH, encoding="utf-8")
        shutil.copytree(ROOT / "suites" / "aime25", folder / "suites" / "aime25")
        self.runs: dict[str, Run] = {}

    def run(self, name: str, *args: str, cache: str = "cache", env: dict[str, str] | None = None) -> Run:
        if name in self.runs:
            return self.runs[name]
        log = self.folder / f"{name}.requests.jsonl"
        environ = self.standins.env()
        environ["PYTHONPATH"] = os.pathsep.join([environ["PYTHONPATH"], str(self.folder)])  # the answers
        environ.update(
            AGENTEVAL_STANDIN_LOG=str(log),
            AGENTEVAL_STANDIN_SCRIPT="rehearsal_answers:SCRIPT",
            **(env or {}),
        )
        options = [
            "suites/aime25", "-p", "no:cacheprovider", *args,
            f"--agenteval-out={name}/aime25.jsonl", f"--agenteval-cache-dir={cache}",
        ]  # fmt: skip
        # the controller in this process, as a process in the folder would have it (its
        # environment, working directory, streams): no interpreter to start and import;
        # the servers, the sandbox and the -n 2 workers are processes of their own as before
        with as_a_process(self.folder, environ, hang_s=150) as (out, err):  # as its subprocess had
            code = pytest.main(options)
        done = subprocess.CompletedProcess(options, int(code), out.getvalue(), err.getvalue())
        self.runs[name] = run = Run(self.folder / name, log, done)
        return run


class Run:
    def __init__(self, out: Path, log: Path, done: subprocess.CompletedProcess[str]) -> None:
        self.out, self.log, self.done = out, log, done
        lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        # the adapter-is-live probe's two greedy completions at each LoRA's server start
        self.probes = [r for r in lines if r["body"].get("prompt") == PROBE_PROMPT]
        self.requests = [r for r in lines if r not in self.probes]  # the sweep's own

    @property
    def output(self) -> str:
        return self.done.stderr + self.done.stdout

    def bodies(self, label: str, without_model: bool = False) -> list[str]:
        """The label's request bodies (sorted, canonical JSON); `without_model`: less its name."""
        name = self.request_names()[label]
        rows = [r["body"] for r in self.requests if r["model"] == name]
        if without_model:
            rows = [{k: v for k, v in body.items() if k != "model"} for body in rows]
        return sorted(json.dumps(body, sort_keys=True) for body in rows)

    def request_names(self) -> dict[str, str]:
        """label -> the model name its requests carry (its summary's)."""
        names = {}
        for label in (BASE, LORA, OTHER):
            _, (summary,) = read_results(self.out / f"aime25-{label}.jsonl")
            names[label] = summary["model"]["name"]
        return names

    def summary(self, label: str) -> dict[str, Any]:
        return read_results(self.out / f"aime25-{label}.jsonl")[1][0]


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory: pytest.TempPathFactory) -> Rehearsal:
    return Rehearsal(tmp_path_factory.mktemp("rehearsal"))


def _forward(rehearsal: Rehearsal) -> Run:
    return rehearsal.run("thinking-on", *SWEEP, *XDIST, *MODELS, "--thinking=on")


def _finished(run: Run, status: int = 0) -> None:
    """The sweep ran to its end, every item passed (the scripted model solves both problems
    in retool mode; in text-only mode its first turn is a tool call: `status` 1, failed)."""
    assert run.done.returncode == status, run.output[-3000:]
    assert " error" not in run.done.stdout.strip().splitlines()[-1], run.output[-3000:]


def test_a_later_wave_sends_what_the_first_wave_sends(rehearsal: Rehearsal) -> None:
    run = _forward(rehearsal)
    _finished(run)
    assert "agenteval: sweep wave 1/2 running: base, lora-step-200 (1 server at a time)" in run.output
    assert "agenteval: other waits for wave 1/2 (base, lora-step-200) to finish" in run.output
    assert "agenteval: sweep wave 2/2 running: other" in run.output
    names = run.request_names()
    per_model = Counter(r["model"] for r in run.requests)
    assert per_model == {names[label]: 8 for label in (BASE, LORA, OTHER)}  # 2 problems x 2 samples x 2 turns
    first, later = run.bodies(BASE, without_model=True), run.bodies(OTHER, without_model=True)
    assert later == first == run.bodies(LORA, without_model=True)
    body = json.loads(later[0])
    assert body["chat_template_kwargs"] == {"enable_thinking": True}
    assert (body["top_k"], body["min_p"], body["repetition_penalty"]) == (
        -1,
        0.0,
        1.0,
    )  # vLLM's defaults, sent
    assert body["max_tokens"] < 1024  # the room left, as /tokenize counted the prompt
    for label in (BASE, OTHER):  # the summary: the server's defaults, nothing temporary
        served = run.summary(label)["model"]["served"]
        assert served["sampling_defaults"] == {"top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0}
        assert ".agenteval-serve-" not in json.dumps(run.summary(label)["model"])


def test_the_reverse_order_finds_every_answer_in_the_cache(rehearsal: Rehearsal) -> None:
    _forward(rehearsal)
    reverse = rehearsal.run("reverse", *SWEEP, *reversed(MODELS), "--thinking=on")
    _finished(reverse)
    assert "agenteval: sweep wave 1/2 running: other (1 server at a time)" in reverse.output
    assert reverse.requests == []  # 0 completion requests: the same cache keys in either wave
    for label in (BASE, LORA, OTHER):
        assert reverse.summary(label)["requests"]["cached_generations"] == 4


def test_the_reverse_order_sends_the_same_bodies_for_each_model(rehearsal: Rehearsal) -> None:
    forward = _forward(rehearsal)
    fresh = rehearsal.run("reverse-fresh", *SWEEP, *reversed(MODELS), "--thinking=on", cache="cache-reverse")
    _finished(fresh)
    for label in (BASE, LORA, OTHER):  # `other` in wave 1 now, the base and its LoRA in wave 2
        assert fresh.bodies(label) == forward.bodies(label)


def test_thinking_off_after_thinking_on_sends_every_request_again(rehearsal: Rehearsal) -> None:
    on = _forward(rehearsal)
    off = rehearsal.run("thinking-off", *SWEEP, *MODELS, "--thinking=off")
    _finished(off)
    assert len(off.requests) == len(on.requests) == 24
    assert {json.dumps(r["body"]["chat_template_kwargs"]) for r in off.requests} == {
        '{"enable_thinking": false}'
    }
    for label in (BASE, LORA, OTHER):
        assert off.summary(label)["requests"]["cached_generations"] == 0


def test_continuation_tokens_in_every_wave(rehearsal: Rehearsal) -> None:
    run = rehearsal.run("tokens", *SWEEP, *MODELS, "--continuation=tokens", cache="cache-tokens")
    _finished(run)
    paths = Counter((r["model"], r["path"]) for r in run.requests)
    names = run.request_names()
    # every turn a token-id prompt on /v1/completions, rendered by /tokenize: in wave 2 as in wave 1
    assert paths == {(names[label], "/v1/completions"): 8 for label in (BASE, LORA, OTHER)}
    assert all(isinstance(r["body"]["prompt"], list) for r in run.requests)
    assert run.bodies(OTHER, without_model=True) == run.bodies(BASE, without_model=True)


def test_samples_per_request_in_every_wave(rehearsal: Rehearsal) -> None:
    args = [a for a in SWEEP if a not in ("--mode=retool", "--val-n=2")]
    run = rehearsal.run(
        "n", *args, *MODELS, "--mode=text-only", "--val-n=4", "--samples-per-request=4", cache="cache-n"
    )
    _finished(run, status=1)
    names = run.request_names()
    for label in (BASE, LORA, OTHER):  # one request of n=4 a problem, in wave 2 as in wave 1
        assert [json.loads(b)["n"] for b in run.bodies(label)] == [4, 4], names


def test_a_worker_killed_mid_item_in_the_first_wave(rehearsal: Rehearsal) -> None:
    crashed = f"test_aime25[{BASE}:1]"
    env = {"REHEARSAL_CRASH": crashed, "REHEARSAL_CRASH_MARK": str(rehearsal.folder / "crashed")}
    run = rehearsal.run("crash", *SWEEP, *XDIST, *MODELS, "--thinking=on", cache="cache-crash", env=env)
    assert (rehearsal.folder / "crashed").exists()
    assert run.done.returncode == 1, run.output[-3000:]
    assert "agenteval: sweep wave 2/2 running: other" in run.output  # the wave ended all the same
    assert f"ERROR suites/aime25/test_aime25.py::{crashed}" in run.output
    assert Counter(r["model"] for r in run.requests)[run.request_names()[OTHER]] == 8


def test_a_two_shard_sweep_merges(rehearsal: Rehearsal) -> None:
    _forward(rehearsal)
    shards = [
        rehearsal.run(f"shard-{i}", *SWEEP, *MODELS, "--thinking=on", f"--agenteval-shard={i}/2")
        for i in (0, 1)
    ]
    for shard in shards:
        _finished(shard)
    for label in (BASE, LORA, OTHER):
        files = [str(shard.out / f"aime25-{label}.jsonl") for shard in shards]
        merged = rehearsal.folder / "merged" / f"aime25-{label}.jsonl"
        with as_a_process(rehearsal.folder) as (out, err):  # `python -m pytest_agenteval merge`
            code = main(["merge", *files, "-o", str(merged)])
        assert code == 0, out.getvalue() + err.getvalue()
        assert read_results(merged)[1][0]["problems"] == 2


def test_the_same_sweep_on_sglang(rehearsal: Rehearsal) -> None:
    forward = _forward(rehearsal)
    run = rehearsal.run(
        "sglang", *SWEEP, *MODELS, "--thinking=on", "--serve-backend=sglang", cache="cache-sglang"
    )
    _finished(run)
    assert "(sglang, launched)" in run.output
    # SGLang picks a LoRA only from `base:adapter` (the bare adapter name gets the base)
    names = run.request_names()
    assert names[LORA].startswith(f"{names[BASE]}:lora-step-200-")
    assert Counter(r["model"] for r in run.requests)[names[LORA]] == 8
    probe = run.summary(LORA)["model"]["served"]["adapter_probe"]
    assert probe["adapter"] == names[LORA] and probe["live"]  # its logprobs are not the base's
    assert [r["model"] for r in run.probes] == [names[BASE], names[LORA]]
    for label in (BASE, LORA, OTHER):
        assert run.bodies(label, without_model=True) == forward.bodies(label, without_model=True)
