"""`--serve` over a whole sweep through the plugin: the embedded gguf, a gguf LoRA on it (one
llama.cpp server for both) and a copy of the gguf (a server of its own), one server at a time
(--serve-max-servers 1), in one process; the same sweep under -n 2 is
tests/sweep/test_cpu_sweep_serve.py's (one run there for both its tests). Needs sweep-core's
parametrisation by model (pytest_agenteval/models/sweep.py); until that is merged beside this
it skips, saying so."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from pytest_agenteval.models.backends.llama import embedded_model_path
from pytest_agenteval.testing.models import ModelFiles
from tests.conftest import TINY_PROBLEMS, link_or_copy, write_jsonl

POST = '"POST /v1/chat/completions HTTP/1.1" 200'
PROBLEMS = 2
FAST = ("--serve", "--max-tokens=8", "--n-ctx=1024", "--llama-threads=1", "--val-n=1")

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pytest_agenteval.models.sweep") is None,
    reason="needs sweep-core's repeatable --model-path (pytest_agenteval/models/sweep.py)",
)


def test_a_sweep_serves_base_and_adapter_together_and_the_other_gguf_after(
    run_suite, tmp_path: Path, agenteval_model_files: ModelFiles, agenteval_perturbed_gguf: Path
) -> None:
    base = embedded_model_path()
    lora = agenteval_model_files.gguf_lora(seed=1)  # make_gguf_lora(seed=1) on the base, once a session
    # other weights: a byte copy of the base has its cache key in every wave, and is answered
    # from the base's generations without a server
    copy = link_or_copy(agenteval_perturbed_gguf, tmp_path / "copy.gguf")  # the perturbed bytes, another path
    # two of the tiny problems: each server still answers its models one after the other
    data = write_jsonl(tmp_path / "two.jsonl", TINY_PROBLEMS[:PROBLEMS])
    result, out = run_suite(
        *FAST,
        f"--model-path=smol={base}",
        f"--model-path=smol-lora={lora}",
        f"--model-path=copy={copy}",
        f"--base-model={base}",
        "--serve-max-servers=1",
        data=data,
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 3 * PROBLEMS  # 3 models
    assert "errors" not in outcomes and "error" not in outcomes
    logs = sorted(out.parent.glob("server-*.log"))
    assert [p.name for p in logs] == ["server-0-smol.log", "server-1-copy.log"]  # two servers, not three
    assert [p.read_text().count(POST) for p in logs] == [2 * PROBLEMS, PROBLEMS]
    stderr = result.stderr.str()
    stopped = stderr.index("stopped the server of smol, smol-lora: its items are done")
    assert stopped < stderr.index("starting llama-cpp server 2/2 for copy")  # a wave: one after the other
    assert not list(out.parent.glob(".agenteval-serve-*"))  # the served files (keys) went with the run
