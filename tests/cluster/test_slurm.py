"""examples/slurm on a real SLURM cluster (tests/cluster/slurm.py): `sbatch --array=0-3
agenteval.sbatch` evaluates AIME in four shards against the package's OpenAI test server
(real sockets; it logs every request), sharing one generation cache folder;
`merge.sbatch`, a dependent job, joins them. The merged summary must be the unsharded
run's. Then a task that never finishes (its model hangs on one problem) is cancelled with
scancel once the rest of its shard is in the cache; the merge refuses the missing shard;
`sbatch --array=<that index>` reruns it, requesting only the generations the cancelled
task had not finished, and the merge passes its gate."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.testing import OpenAITestServer
from pytest_agenteval.testing._faults import FaultContext
from pytest_agenteval.testing._responders import last_user_text
from tests.cluster.slurm import SlurmCluster, job_logs

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "slurm"
# Our own sums (not AIME's); 8 problems, 2 generations each: 16 requests a run.
PROBLEMS = [
    {"id": i, "problem": f"What is {a} + {b}?", "answer": str(a + b)}
    for i, (a, b) in enumerate([(3, 4), (12, 49), (100, 23), (7, 7), (31, 11), (250, 250), (9, 80), (64, 2)])
]
VAL_N = 2
STUCK = PROBLEMS[5]  # the recovery test's model hangs on this problem
EVAL_ARGS = "-p no:cacheprovider --val-n 2 --max-tokens 16 --mode text-only --idle-timeout 600"
# the sbatch line asks 4 cores a task, as a GPU node has them; this node has nproc in all
ONE_CORE = ("--cpus-per-task=1",)
GATE = "aime25.average_at_n >= 0.3"
# Fields that differ by design between two runs of the same generations: when and how
# long it ran, the process that ran it, how the requests were served (cache hits), the shard.
RUN_FIELDS = {"started_at", "finished_at", "duration_s", "harness", "backend", "shard", "merged", "workers"}
RUN_PATHS = {"out", "cache_dir"}  # of the config: where this run wrote


def nodeid(problem: dict[str, Any]) -> str:
    return f"suites/aime25/test_aime25.py::test_aime25[{problem['id']}]"


def reply(body: dict[str, Any]) -> str:
    """Right for two seeds in three, else 0: the metrics are neither 0 nor 1, and the
    same generation (its seed) always gets the same answer, sharded or not."""
    problem = next(p for p in PROBLEMS if p["problem"] in last_user_text(body))
    answer = problem["answer"] if int(body["seed"]) % 3 else "0"
    return f"The sum is \\boxed{{{answer}}}."


class HangingModel:
    """A fault plan: while `hanging` is set, requests about STUCK get no answer (a stall),
    as from a model server that hangs on one prompt."""

    def __init__(self) -> None:
        self.hanging = threading.Event()
        self.stalls = 0  # requests it left hanging

    def __call__(self, context: FaultContext) -> str | None:
        if self.hanging.is_set() and STUCK["problem"] in last_user_text(context.body):
            self.stalls += 1
            return "stall"
        return None


@pytest.fixture(scope="module")
def hanging_model() -> HangingModel:
    return HangingModel()


@pytest.fixture(scope="module")
def server(hanging_model: HangingModel) -> Iterator[OpenAITestServer]:
    with OpenAITestServer(script=reply, fault_plan=hanging_model, stall_s=600.0) as srv:
        yield srv


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "sums.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in PROBLEMS), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def unsharded(
    server: OpenAITestServer, dataset: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """The unsharded run of the same suite and options (cache of its own), with the gate
    the merge applies: its summary line, and the keys of the requests it made."""
    folder = tmp_path_factory.mktemp("unsharded")
    before = len(server.requests)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(REPO / "suites" / "aime25"), *eval_args(dataset)]
        + [f"--endpoint={server.url}", f"--agenteval-out={folder / 'results.jsonl'}"]
        + [f"--agenteval-cache-dir={folder / 'cache'}", f"--agenteval-gate={GATE}"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    requests = server.requests[before:]
    assert [r["outcome"] for r in requests] == ["ok"] * len(PROBLEMS) * VAL_N
    lines = [json.loads(line) for line in (folder / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    return {
        "summary": summary(folder / "results.jsonl"),
        "problems": [line for line in lines if line["type"] == "problem"],
        "requests": requests,
    }


def eval_args(dataset: Path) -> list[str]:
    return [*EVAL_ARGS.split(), f"--dataset-path={dataset}"]


def job_env(server: OpenAITestServer, dataset: Path, folder: Path, **more: str) -> dict[str, str]:
    """The knobs of agenteval.sbatch and merge.sbatch, as a user sets them."""
    return {
        "VENV": sys.prefix,
        "SUITE": str(REPO / "suites" / "aime25"),
        "MODEL_ARGS": f"--endpoint {server.url}",
        "EVAL_ARGS": " ".join(eval_args(dataset)),
        "RESULTS": str(folder / "results"),
        "CACHE": str(folder / "cache"),
        "GATE": GATE,
        **more,
    }


def submit_four_shards_and_merge(cluster: SlurmCluster, folder: Path, env: dict[str, str]) -> tuple[str, str]:
    """agenteval.sbatch as a four-task array, and merge.sbatch to run once they all ended: the job ids."""
    array = cluster.sbatch(EXAMPLES / "agenteval.sbatch", "--array=0-3", *ONE_CORE, cwd=folder, env=env)
    merge = cluster.sbatch(EXAMPLES / "merge.sbatch", f"--dependency=afterany:{array}", cwd=folder, env=env)
    return array, merge


def summary(path: Path) -> dict[str, Any]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    (only,) = [line for line in lines if line["type"] == "summary"]
    return only


def comparable(summary: dict[str, Any]) -> dict[str, Any]:
    config = {key: value for key, value in summary["config"].items() if key not in RUN_PATHS}
    return {key: value for key, value in summary.items() if key not in RUN_FIELDS} | {"config": config}


def cached_generations(cache: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in cache.glob("*.jsonl"))


def test_an_sbatch_array_of_four_shards_merges_into_the_unsharded_summary(
    slurm_cluster: SlurmCluster,
    server: OpenAITestServer,
    dataset: Path,
    unsharded: dict[str, Any],
    tmp_path: Path,
) -> None:
    env = job_env(server, dataset, tmp_path)
    before = len(server.requests)
    array, merge = submit_four_shards_and_merge(slurm_cluster, tmp_path, env)
    tasks = slurm_cluster.wait([array, merge], tmp_path)

    files = [tmp_path / "results" / f"shard-{i}.jsonl" for i in range(4)]
    assert [f.name for f in files if f.exists()] == [f.name for f in files], job_logs(tmp_path)
    shards = [summary(f) for f in files]
    assert {key: t.exit_code for key, t in tasks.items()} == {
        **{f"{array}_{i}": expected_exit(shards[i], unsharded) for i in range(4)},
        merge: "0:0",
    }, job_logs(tmp_path)
    assert [(s["shard"]["index"], s["shard"]["count"]) for s in shards] == [(i, 4) for i in range(4)]
    assert sorted(k for s in shards for k in s["shard"]["items"]) == sorted(map(nodeid, PROBLEMS))
    # every generation requested once, by one of the shards: the very requests of the unsharded run
    assert sorted(r["key"] for r in server.requests[before:]) == sorted(
        r["key"] for r in unsharded["requests"]
    )
    merged = summary(tmp_path / "results" / "merged.jsonl")
    assert comparable(merged) == comparable(unsharded["summary"])
    assert merged["backend"] == unsharded["summary"]["backend"]  # 16 requests, none cached


def expected_exit(shard: dict[str, Any], unsharded: dict[str, Any]) -> str:
    """pytest's exit status for the shard's items, without a gate: 1 if one of them was
    unsolved (no generation right) in the unsharded run, else 0."""
    unsolved = {p["nodeid"] for p in unsharded["problems"] if not p["pass_at_n"]}
    return "1:0" if unsolved & set(shard["shard"]["items"]) else "0:0"


def test_a_cancelled_task_resubmitted_alone_requests_only_what_it_had_not_finished(
    slurm_cluster: SlurmCluster,
    server: OpenAITestServer,
    hanging_model: HangingModel,
    dataset: Path,
    unsharded: dict[str, Any],
    tmp_path: Path,
) -> None:
    env = job_env(server, dataset, tmp_path)
    before = len(server.requests)
    hanging_model.hanging.set()
    try:
        array, merge = submit_four_shards_and_merge(slurm_cluster, tmp_path, env)
        stuck = wait_for_the_hung_task(slurm_cluster, server, hanging_model, array, before, tmp_path)
        slurm_cluster.scancel(f"{array}_{stuck}")  # as its time limit or a preemption would
        tasks = slurm_cluster.wait([array, merge], tmp_path)
    finally:
        hanging_model.hanging.clear()
    answered = {r["key"] for r in server.requests[before:] if r["outcome"] == "ok"}
    assert tasks[f"{array}_{stuck}"].state == "CANCELLED"
    assert not (tmp_path / "results" / f"shard-{stuck}.jsonl").exists()
    assert tasks[merge].exit_code == "4:0", job_logs(tmp_path)
    refusal = (tmp_path / f"agenteval-merge-{merge}.log").read_text(encoding="utf-8")
    assert refusal.splitlines() == [
        f"pytest-agenteval merge: shard {stuck} of 4 missing: run --agenteval-shard {stuck}/4 "
        "and pass its results file too"
    ]

    again = len(server.requests)
    rerun = slurm_cluster.sbatch(
        EXAMPLES / "agenteval.sbatch", f"--array={stuck}", *ONE_CORE, cwd=tmp_path, env={**env, "SHARDS": "4"}
    )
    merge = slurm_cluster.sbatch(
        EXAMPLES / "merge.sbatch", f"--dependency=afterany:{rerun}", cwd=tmp_path, env=env
    )
    tasks = slurm_cluster.wait([rerun, merge], tmp_path)

    shard = summary(tmp_path / "results" / f"shard-{stuck}.jsonl")
    assert (shard["shard"]["index"], shard["shard"]["count"]) == (stuck, 4)
    assert {key: t.exit_code for key, t in tasks.items()} == {
        f"{rerun}_{stuck}": expected_exit(shard, unsharded),
        merge: "0:0",
    }, job_logs(tmp_path)
    # the rerun asked for exactly the shard's generations not answered before the cancel:
    # STUCK's, and nothing the cancelled task had finished (the shared cache held those)
    items = set(shard["shard"]["items"])
    prompts = {p["problem"] for p in PROBLEMS if nodeid(p) in items}
    of_shard = [r["key"] for r in unsharded["requests"] if any(p in r["prompt"] for p in prompts)]
    rerun_keys = [r["key"] for r in server.requests[again:]]
    assert sorted(rerun_keys) == sorted(k for k in of_shard if k not in answered)
    stuck_keys = {r["key"] for r in unsharded["requests"] if STUCK["problem"] in r["prompt"]}
    reused = len(of_shard) - len(rerun_keys)
    assert stuck_keys <= set(rerun_keys) and reused > 0  # STUCK's were asked again, not all
    merged = summary(tmp_path / "results" / "merged.jsonl")
    assert merged["requests"] == {
        "generations": len(PROBLEMS) * VAL_N,
        "attempts": len(PROBLEMS) * VAL_N - reused,
        "retries": 0,
        "cached_generations": reused,
    }
    assert comparable(merged) | {"requests": None} == comparable(unsharded["summary"]) | {"requests": None}


def wait_for_the_hung_task(
    cluster: SlurmCluster,
    server: OpenAITestServer,
    hanging: HangingModel,
    array: str,
    before: int,
    logs: Path,
) -> int:
    """The index of the one task still running once the others finished, when its only
    requests in flight are the hanging ones, and every generation answered so far is in
    the cache, for half a second (nothing answered and not yet written: the rerun's exact
    request count depends on it)."""
    deadline = time.monotonic() + 180
    settled_since, answered_before = None, -1
    while time.monotonic() < deadline:
        running = [t for t in cluster.tasks(array) if t.state not in ("COMPLETED", "FAILED")]
        answered = sum(r["outcome"] == "ok" for r in server.requests[before:])
        settled = (
            len(running) == 1
            and running[0].state == "RUNNING"
            and hanging.stalls > 0
            and server.in_flight == hanging.stalls
            and answered == answered_before
            and cached_generations(logs / "cache") == answered
        )
        settled_since = (settled_since or time.monotonic()) if settled else None
        if settled_since is not None and time.monotonic() - settled_since >= 0.5:
            return int(running[0].task or 0)
        answered_before = answered
        time.sleep(0.1)
    raise AssertionError(f"no task hung on {STUCK['problem']!r} after 180 s\n{job_logs(logs)}")
