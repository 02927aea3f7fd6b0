"""`--serve` in a sweep, driven through `launch_sweep` and its controller plugin by a small
conftest (sweep-core's parametrisation by model comes separately): real llama.cpp servers on
the embedded gguf, a seeded gguf LoRA on it (one server for both) and a copy of the gguf
(a server of its own), waves with --serve-max-servers 1, with and without -n 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agenteval.models.backends.llama import embedded_model_path
from pytest_agenteval.models.serve.launcher import group_empty
from pytest_agenteval.testing.models import ModelFiles
from tests.conftest import link_or_copy

CONFTEST = """
import asyncio, json, os, sys, time
from dataclasses import dataclass
from pathlib import Path

from pytest_agenteval.api.sampler import SamplingParams
from pytest_agenteval.config.settings import Settings
from pytest_agenteval.models import make_sampler
from pytest_agenteval.models.choice import served_choice
from pytest_agenteval.plugin.sweep_servers import SWEEP_SERVERS, launch_sweep, model_ready

@dataclass(frozen=True)
class Model:
    label: str
    source: str

MODELS = [Model(*pair.split("=", 1)) for pair in os.environ["SWEEP_MODELS"].split(",")]
STATE = {}

def say(line):
    sys.stderr.write(line + "\\n")

def pytest_configure(config):
    # the sweep's options as Settings, not flags: a flag would make the plugin's own
    # single-model --serve launch a server too (the sweep path replaces it once merged)
    STATE["settings"] = settings = Settings(**json.loads(os.environ["SWEEP_SETTINGS"]))
    if hasattr(config, "workerinput"):
        # as sweep-core's plugin/sweep.py hands them over: served_choice per label
        STATE["choices"] = {k: served_choice(v) for k, v in config.workerinput["served"].items()}
    else:
        STATE["choices"] = launch_sweep(config, settings, MODELS, say)
    STATE["ready"] = model_ready(STATE["choices"])

def pytest_configure_node(node):
    node.workerinput["served"] = {
        label: {
            "endpoints": list(c.endpoints), "model_name": c.model_name,
            "served": c.served.as_dict(), "key": c.api_key,
        }
        for label, c in STATE["choices"].items()
    }

def pytest_unconfigure(config):
    servers = config.stash.get(SWEEP_SERVERS, None)
    if servers is not None:
        record = {
            "servers": [list(s.labels) for s in servers.plan.servers],
            "pids": {i: r.servers[0].pid for i, r in servers.launches.items()},
            "logs": {i: str(r.servers[0].log_path) for i, r in servers.launches.items()},
            "started": servers.started_at, "stopped": servers.stopped_at, "errors": servers.errors,
            "folder": str(servers.folder),
        }
        Path(os.environ["SWEEP_RECORD"]).write_text(json.dumps(record))
"""

TESTS = """
import asyncio, json, os, time
import pytest
from pytest_agenteval.api.sampler import SamplingParams
from pytest_agenteval.models import make_sampler
from conftest import MODELS, STATE

PARAMS = SamplingParams(temperature=0.0, top_p=1.0, top_k=0, max_tokens=6, seed=0)
ITEMS = [(m.label, i) for m in MODELS for i in range(ITEMS_PER_MODEL)]

@pytest.mark.parametrize("label,index", ITEMS, ids=[f"{label}:{i}" for label, i in ITEMS])
def test_item(label, index):
    began, ready = time.time(), STATE["ready"](label)
    sampler = make_sampler(STATE["choices"][label], STATE["settings"], 1)
    async def ask():
        try:
            return (await sampler.complete([{"role": "user", "content": "Say hi"}], PARAMS)).text
        finally:
            await sampler.aclose()
    text = asyncio.run(ask())
    row = {"label": label, "began": began, "ended": time.time(), "ready": ready, "text": text}
    with open(os.environ["SWEEP_ITEMS"], "a") as out:
        out.write(json.dumps(row) + "\\n")
"""

POST = '"POST /v1/chat/completions HTTP/1.1" 200'
PER_MODEL = 2


@pytest.fixture(scope="module")
def copy_of_the_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second path with the base's bytes (a server of its own), made once for the module:
    a hard link where the filesystem allows it (no 98 MB copy), else a copy."""
    return link_or_copy(embedded_model_path(), tmp_path_factory.mktemp("copy") / "copy.gguf")


@pytest.fixture
def sweep(
    pytester: pytest.Pytester, tmp_path: Path, agenteval_model_files: ModelFiles, copy_of_the_base: Path
):
    base, copy = embedded_model_path(), copy_of_the_base
    lora = agenteval_model_files.gguf_lora(seed=1)  # make_gguf_lora(seed=1) on the base, once a session
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_sweep=TESTS.replace("ITEMS_PER_MODEL", str(PER_MODEL)))
    record, items = tmp_path / "record.json", tmp_path / "items.jsonl"
    pytester._monkeypatch.setenv("SWEEP_MODELS", f"smol={base},smol-lora={lora},copy={copy}")
    pytester._monkeypatch.setenv("SWEEP_RECORD", str(record))
    pytester._monkeypatch.setenv("SWEEP_ITEMS", str(items))

    def run(*args: str, **options):
        settings = {
            "serve": True, "base_model": str(base), "n_ctx": 512, "llama_threads": 1,
            "out": str(pytester.path / "out" / "results.jsonl"), **options,
        }  # fmt: skip
        pytester._monkeypatch.setenv("SWEEP_SETTINGS", json.dumps(settings))
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)
        rows = [json.loads(line) for line in items.read_text().splitlines()] if items.exists() else []
        return result, json.loads(record.read_text()), rows

    return run


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one process", "-n 2"])
def test_waves_one_server_for_base_and_adapter_stopped_when_its_items_are_done(sweep, workers) -> None:
    result, record, items = sweep(*workers, serve_max_servers=1)
    result.assert_outcomes(passed=3 * PER_MODEL)
    assert record["servers"] == [["smol", "smol-lora"], ["copy"]]  # base and adapter: one server
    assert record["errors"] == {}
    logs = {i: Path(p) for i, p in record["logs"].items()}
    assert sorted(p.name for p in logs.values()) == ["server-0-smol.log", "server-1-copy.log"]
    assert [logs[i].read_text().count(POST) for i in ("0", "1")] == [2 * PER_MODEL, PER_MODEL]
    # the first server stopped once its models' last item ended, before the next server started
    first_done = max(row["ended"] for row in items if row["label"] != "copy")
    assert first_done <= record["stopped"]["0"] <= record["started"]["1"]
    assert record["stopped"]["1"] >= max(row["ended"] for row in items if row["label"] == "copy")
    assert all(group_empty(pid) for pid in record["pids"].values())
    texts = {row["label"]: row["text"] for row in items}
    assert texts["smol-lora"] != texts["smol"] == texts["copy"]  # the adapter is applied, not the base
    assert not Path(record["folder"]).exists()  # the served files (keys) are gone with the run
    stderr = result.stderr.str()
    assert "stopped the server of smol, smol-lora: its items are done" in stderr


def test_without_a_cap_every_cpu_server_starts_at_once(sweep) -> None:
    # one process: the controller starts the servers before any worker would (xdist's hand-off
    # of the choices is the waves test's -n 2 case); the cap, not the workers, decides
    result, record, items = sweep()
    result.assert_outcomes(passed=3 * PER_MODEL)
    assert set(record["started"]) == {"0", "1"}
    assert all(row["ready"] for row in items)  # no item ever met a server that was not up


def test_a_server_that_fails_errors_its_models_items_and_the_others_go_on(sweep) -> None:
    result, record, items = sweep(serve_max_servers=1, serve_args=["--no-such-flag"])
    # the llama.cpp config-file server ignores argv flags: base + adapter start; the copy fails
    assert list(record["errors"]) == ["1"]
    assert record["errors"]["1"].startswith(
        "the server of copy did not start: llama-cpp server exited with code 2"
    )
    result.assert_outcomes(passed=2 * PER_MODEL, failed=PER_MODEL)
    result.stdout.fnmatch_lines(["*SamplerError: the server of copy did not start: llama-cpp server exited*"])
    assert "sweep-key" not in result.stdout.str()
