"""The Ray recipe, examples/ray/run_shards.py, run as written on a local Ray instance
(`ray.init(address="local", num_cpus=2)`, CPU tasks: `--num-gpus 0`) and, for the other
tests, connected to a running Ray cluster (`--address`, as on a cluster's head node: one
`ray start --head` for the module, two CPUs, no GPU): its shards are Ray tasks running
`python -m pytest ... --agenteval-shard I/N` against the package's test server (real
sockets, counted requests), then `pytest-agenteval merge` on the driver. Ray is an
optional extra (`pip install -e '.[ray]'`, README command 2): without it these tests skip,
and under AGENTEVAL_CI=1 fail (tests/_oracle.py)."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pytest_agenteval.testing import FaultContext, OpenAITestServer, ServerConfig
from tests._oracle import require_oracle
from tests.cluster._recipes import ANSWERS, REPO, child_environment
from tests.cluster.slurm import free_port
from tests.conftest import SUITE_FILE, TINY_PROBLEMS, read_results, write_jsonl


@pytest.fixture(scope="module", autouse=True)
def _ray_installed() -> None:
    """Before the module's other fixtures, which start Ray."""
    if importlib.util.find_spec("ray") is None:
        require_oracle(
            "Ray is not installed: pip install -e '.[ray]' (README command 2; the Ray recipe's tests)"
        )


SCRIPT = REPO / "examples" / "ray" / "run_shards.py"
# Ray 2.60's `ray start` asks for an auth token unless told otherwise; ray.init's local instance does not
NO_AUTH = {"RAY_AUTH_MODE": "disabled"}


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Ray head node for the module (`ray start --head --block`, two CPUs, no GPU to see:
    CUDA_VISIBLE_DEVICES is empty), its address. Its tasks run with its environment (this
    checkout first on the path). Stopped by stopping that process, which stops what it
    started (not `ray stop`: that stops every Ray instance on the machine)."""
    ray = str(Path(sys.executable).parent / "ray")
    port = free_port()
    folder = tmp_path_factory.mktemp("ray-head")
    log = folder / "head.log"  # a file, not a pipe nobody drains once the node is up
    with log.open("w") as out:
        head = subprocess.Popen(
            [ray, "start", "--head", "--block", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
             "--disable-usage-stats", f"--dashboard-port={free_port()}",
             f"--dashboard-agent-listen-port={free_port()}"],
            cwd=folder,
            env={**child_environment(), **NO_AUTH, "CUDA_VISIBLE_DEVICES": ""},
            stdout=out, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )  # fmt: skip
    deadline = time.monotonic() + 120  # a guard against a hang only: a loaded machine is slow
    while "Ray runtime started" not in log.read_text():  # it says so once the head node is up
        if head.poll() is not None or time.monotonic() > deadline:
            if head.poll() is None:
                os.killpg(head.pid, signal.SIGKILL)
            head.wait()
            pytest.fail(f"ray start --head exited {head.returncode} or hung:\n{log.read_text()}")
        time.sleep(0.1)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()


GATE = "aime25.average_at_n >= 0.5"
# what a summary says about the model's answers: the same however the run was split
METRICS = ("average_at_n", "pass_at_n", "maj_at_n", "format_rate", "problems", "generations", "complete")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The project a node runs the shards in: a suite file and its data."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "test_tiny.py").write_text(SUITE_FILE, encoding="utf-8")
    write_jsonl(folder / "tiny_aime.jsonl", TINY_PROBLEMS)
    return folder


def shard_args(url: str, cache: Path, *more: str) -> list[str]:
    return [
        "test_tiny.py",
        f"--endpoint={url}",
        "--dataset-path=tiny_aime.jsonl",
        "--mode=text-only",
        "--val-n=2",
        "-p",
        "no:cacheprovider",
        f"--agenteval-cache-dir={cache}",
        *more,
    ]


def run_python(args: list[str], cwd: Path, **environ: str) -> subprocess.CompletedProcess[str]:
    """A child Python with this checkout first on its path (Ray's workers inherit it)."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env={**child_environment(), **environ},
        capture_output=True,
        text=True,
        timeout=600,
    )


def run_shards(
    project: Path, results: Path, *args: str, address: str | None = None, **environ: str
) -> subprocess.CompletedProcess[str]:
    """The driver: on a local Ray instance of two CPUs, or connected to the cluster at
    `address` (where a task's own folder is the head's: the project is `--project-dir`)."""
    where = ["--num-cpus", "2"] if address is None else ["--address", address, "--project-dir", str(project)]
    return run_python(
        [str(SCRIPT), *where, "--results", str(results), "--agenteval-gate", GATE, *args],
        cwd=project,
        **(environ if address is None else {**NO_AUTH, **environ}),
    )


def run_two_cpu_shards(
    project: Path, results: Path, url: str, cache: Path, *more: str, address: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The tiny suite against `url` in two shards, Ray tasks on CPUs (`--num-gpus 0`)."""
    return run_shards(
        project,
        results,
        "--shards",
        "2",
        "--num-gpus",
        "0",
        "--",
        *shard_args(url, cache, *more),
        address=address,
    )


def metrics(summary: dict[str, Any]) -> dict[str, Any]:
    return {name: summary.get(name) for name in METRICS}


def solved(problems: list[dict[str, Any]]) -> dict[int, int]:
    return {problem["problem_id"]: problem["num_correct"] for problem in problems}


def test_shards_run_as_ray_tasks_and_merge_to_the_unsharded_runs_numbers(project: Path) -> None:
    results = project.parent / "results"
    with OpenAITestServer(ServerConfig(answers=ANSWERS, answer="no idea")) as server:
        ray_run = run_two_cpu_shards(project, results, server.url, project / "c1")
        ray_requests = len(server.requests)
        plain = run_python(
            [
                "-m",
                "pytest",
                *shard_args(server.url, project / "c2"),
                f"--agenteval-out={project / 'plain.jsonl'}",
            ],
            cwd=project,
        )
    assert ray_run.returncode == 0, ray_run.stdout + ray_run.stderr  # the gate holds on the merged run
    assert ray_requests == 8  # 4 problems x 2 samples, each requested once over the two shards
    assert plain.returncode == 1, plain.stdout  # unsolved problems, no gate
    merged_problems, (merged,) = read_results(results / "merged.jsonl")
    plain_problems, (unsharded,) = read_results(project / "plain.jsonl")
    assert metrics(merged) == metrics(unsharded)
    assert (merged["average_at_n"], merged["complete"]) == (0.5, True)
    assert solved(merged_problems) == solved(plain_problems) == {0: 2, 1: 2, 2: 0, 3: 0}
    shards = [read_results(results / f"shard-{index}.jsonl")[1][0]["shard"] for index in (0, 1)]
    assert [(shard["index"], shard["count"]) for shard in shards] == [(0, 2), (1, 2)]
    assert sorted(item for shard in shards for item in shard["items"]) == [
        f"test_tiny.py::test_aime25[{pid}]" for pid in range(4)
    ]
    assert "shard 0/2: pytest exit 1, complete" in ray_run.stdout  # unsolved problems: no rerun
    assert "running it again" not in ray_run.stdout


def test_an_incomplete_shard_runs_again_and_regenerates_only_what_failed(
    project: Path, ray_cluster: str
) -> None:
    """Problem 2's first attempts get a 500 and `--max-attempts 1` makes that an error: its
    shard ends incomplete, runs again as a new Ray task, and its other item comes from the
    shared cache: 8 generations, 2 of them requested twice."""

    def first_attempt_of_problem_2_fails(context: FaultContext) -> str | None:
        return "500" if context.attempt == 0 and "power 4" in json.dumps(context.body) else None

    results = project.parent / "results"
    config = ServerConfig(answers=ANSWERS, answer="no idea", fault_plan=first_attempt_of_problem_2_fails)
    with OpenAITestServer(config) as server:
        completed = run_two_cpu_shards(
            project, results, server.url, project / "cache", "--max-attempts=1", address=ray_cluster
        )
        outcomes = [request["outcome"] for request in server.requests]
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert (len(outcomes), outcomes.count("500")) == (10, 2)
    shard_of_2 = next(
        index
        for index in (0, 1)
        if "test_tiny.py::test_aime25[2]"
        in read_results(results / f"shard-{index}.jsonl")[1][0]["shard"]["items"]
    )
    assert completed.stdout.count("running it again") == 1
    assert f"shard {shard_of_2}/2: running it again" in completed.stdout
    _, (merged,) = read_results(results / "merged.jsonl")
    assert (merged["average_at_n"], merged["complete"]) == (0.5, True)


def test_gpu_shards_on_a_cluster_without_gpus_stop_with_one_line(project: Path, ray_cluster: str) -> None:
    # no GPU to see, on a machine with some too: Ray counts the GPUs CUDA_VISIBLE_DEVICES lists
    # (the head's, started with it empty; the driver's too)
    completed = run_shards(
        project,
        project.parent / "results",
        "--shards",
        "2",
        "--",
        "test_tiny.py",
        address=ray_cluster,
        CUDA_VISIBLE_DEVICES="",
    )
    assert completed.returncode == 1
    assert completed.stderr.strip().splitlines()[-1] == (
        "run_shards.py: the Ray cluster has 0 GPUs and each shard asks for 1 (--num-gpus): its tasks "
        "would never start; --num-gpus 0 runs the shards on CPUs"
    )
    assert not (project.parent / "results" / "shard-0.log").exists()


def test_a_project_folder_a_node_lacks_stops_with_one_line_naming_the_node(
    project: Path, ray_cluster: str
) -> None:
    missing = project.parent / "no-such-checkout"
    completed = run_shards(
        project,
        project.parent / "results",
        "--shards",
        "2",
        "--num-gpus",
        "0",
        "--project-dir",
        str(missing),
        "--",
        "test_tiny.py",
        address=ray_cluster,
    )
    assert completed.returncode == 4
    assert completed.stderr.strip().splitlines()[-1] == (
        f"run_shards.py: --project-dir {missing} is not a folder on node {socket.gethostname()}: give a path "
        "every node has (shared storage, the same image) or --working-dir"
    )
    assert (
        "running it again" not in completed.stdout
        and not (project.parent / "results" / "merged.jsonl").exists()
    )


@functools.cache
def load_script() -> ModuleType:
    """The script as a module (registered: its dataclass looks its module up while built)."""
    spec = importlib.util.spec_from_file_location("examples_ray_run_shards", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--shards", "2", "--results", "r"],
            "no pytest arguments: give the shard's command line after --, e.g. -- suites/aime25 ...",
        ),
        (["--shards", "0", "--results", "r", "--", "suites/aime25"], "--shards 0: give at least 1"),
        (
            ["--shards", "2", "--results", "r", "--", "suites/aime25", "--agenteval-out=x.jsonl"],
            "--agenteval-out is set by run_shards.py for each shard: remove it after --",
        ),
        (
            ["--shards", "2", "--results", "r", "--", "suites/aime25", "--agenteval-shard", "0/2"],
            "--agenteval-shard is set by run_shards.py for each shard: remove it after --",
        ),
    ],
)
def test_the_drivers_command_line_is_checked_before_ray_starts(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        load_script().parse_args(argv)
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"run_shards.py: error: {message}"


@pytest.mark.parametrize(
    ("exit_status", "complete", "reruns", "expected"),
    [
        (1, False, 0, True),  # an item errored: run the shard again
        (1, False, 1, True),
        (1, False, 2, False),  # --retries 2 spent
        (0, True, 0, False),
        (1, True, 0, False),  # unsolved problems only: the shard is complete
        (4, False, 0, False),  # a usage error ends the same way every time
        (5, False, 0, False),  # nothing collected
        (-9, False, 0, True),  # killed (out of memory): what finished is in the cache
    ],
)
def test_which_shards_run_again(exit_status: int, complete: bool, reruns: int, expected: bool) -> None:
    script = load_script()
    outcome = script.ShardOutcome(0, exit_status, complete, "shard-0.jsonl", "shard-0.log")
    assert script.rerun(outcome, reruns, retries=2) is expected
