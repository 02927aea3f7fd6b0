"""pytest-agenteval on a Ray cluster: each shard of the run is a Ray task on a node of its own
(one GPU each by default), then `pytest-agenteval merge` on the driver.

    python examples/ray/run_shards.py --shards 4 --results /shared/results \\
        --agenteval-gate 'aime25.average_at_n >= 0.30' -- \\
        suites/aime25 --model-path=/shared/checkpoints/step-800 --serve \\
        --agenteval-cache-dir=/shared/cache

Everything after `--` is the pytest command line of one shard; this script adds
`--agenteval-shard I/N` and `--agenteval-out RESULTS/shard-I.jsonl`. Each task runs
`python -m pytest` as a subprocess in the node's copy of the project, so `--serve` launches
the model server on the GPU Ray gave the task. That copy is `--project-dir`: by default the
task's own folder, which `ray job submit --working-dir .` fills with the project on every
node; else a path every node has (a shared checkout, the same image). `--results` and
`--agenteval-cache-dir` must be storage every node and the driver mount. A shard whose run
is incomplete (an item errored or is missing) is run again, up to `--retries` times; the
cache makes a rerun regenerate nothing that finished. The merge then recomputes every
metric, applies the gates (`--agenteval-gate`, `--agenteval-compare`) and this script
exits with its status (docs/ci.md): 0 gates hold, 1 a gate fails or the run is
incomplete, 4 a usage error.

On a cluster: `ray job submit --working-dir . -- python examples/ray/run_shards.py ...` or
`--address auto` on the head node. Without either it starts a local Ray instance
(`--num-cpus`), which with `--num-gpus 0` is how tests/cluster/test_ray.py runs it.
Needs `pip install 'pytest-agenteval[ray]'` on every node.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

try:
    import ray
except ImportError:  # one line, not a traceback
    sys.exit("run_shards.py: Ray is not installed: pip install 'pytest-agenteval[ray]' (on every node)")

# Options this script sets for each shard, so the shard's command line must not.
_OWN_OPTIONS = ("--agenteval-shard", "--agenteval-shard-count", "--agenteval-out")


@dataclass(frozen=True)
class ShardOutcome:
    index: int
    exit_status: int
    complete: bool  # a results file whose every suite summary says complete
    results: str
    log: str
    not_run: str = ""  # why pytest could not start on the node (a missing folder there)

    def line(self, count: int) -> str:
        if self.not_run:
            return f"shard {self.index}/{count}: not run: {self.not_run}"
        state = "complete" if self.complete else "INCOMPLETE"
        return f"shard {self.index}/{count}: pytest exit {self.exit_status}, {state} (log: {self.log})"


def results_complete(path: Path) -> bool:
    """Did the shard's run finish every one of its items? Its results file has summary lines
    and each says `complete` (an errored or missing item makes it incomplete)."""
    if not path.is_file():
        return False
    summaries = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if '"summary"' in line:  # cheap: a problem line (with its texts) is not parsed
                row = json.loads(line)
                if row.get("type") == "summary":
                    summaries.append(row)
    return bool(summaries) and all(summary.get("complete") is True for summary in summaries)


def rerun(outcome: ShardOutcome, reruns: int, retries: int) -> bool:
    """Run a shard again? Only an incomplete one, while retries are left; never after a
    usage error (4) or nothing collected (5): the same command would end the same way."""
    return not outcome.complete and outcome.exit_status not in (4, 5) and reruns < retries


@ray.remote(num_gpus=1)
def run_shard(
    index: int, count: int, pytest_args: Sequence[str], project_dir: str, results_dir: str
) -> ShardOutcome:
    """One shard: `python -m pytest ARGS --agenteval-shard I/N` in the node's project copy, with
    the GPUs Ray assigned (CUDA_VISIBLE_DEVICES, set by Ray, is inherited)."""
    # relative to the task's folder: `ray job submit --working-dir` unpacks the project there
    cwd = Path(project_dir).resolve()
    for flag, folder, fix in (
        ("--results", Path(results_dir), "storage every node and the driver mount"),
        ("--project-dir", cwd, "a path every node has (shared storage, the same image) or --working-dir"),
    ):
        if not folder.is_dir():  # one line for the driver to print, not a task's traceback
            where = f"{flag} {folder} is not a folder on node {socket.gethostname()}: give {fix}"
            return ShardOutcome(index, 4, False, "", "", not_run=where)
    results = Path(results_dir) / f"shard-{index}.jsonl"
    log = Path(results_dir) / f"shard-{index}.log"
    command = [
        sys.executable,
        "-m",
        "pytest",
        *pytest_args,
        f"--agenteval-shard={index}/{count}",
        f"--agenteval-out={results}",
    ]
    with log.open("ab") as output:
        output.write(f"$ {' '.join(command)}\n".encode())
        output.flush()
        status = subprocess.run(command, cwd=cwd, stdout=output, stderr=subprocess.STDOUT).returncode
    return ShardOutcome(index, status, results_complete(results), str(results), str(log))


def parse_args(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    argv = list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(
        prog="run_shards.py",
        usage="%(prog)s --shards N --results DIR [options] -- PYTEST_ARGS...",
        description="Run a pytest-agenteval evaluation as N shards on Ray, then merge them.",
    )
    parser.add_argument("--shards", type=int, required=True, help="the number of shards (N)")
    parser.add_argument("--results", required=True, help="shared folder for shard-I.jsonl and shard-I.log")
    parser.add_argument(
        "--project-dir", default=".", help="the project on every node; relative: to the task's own folder"
    )
    parser.add_argument("--num-gpus", type=float, default=1, help="GPUs per shard; 0 runs on CPUs")
    parser.add_argument("--retries", type=int, default=2, help="reruns of a shard that ended incomplete")
    parser.add_argument(
        "--address", default=None, help="a Ray cluster (auto, ray://...); default: RAY_ADDRESS"
    )
    parser.add_argument("--num-cpus", type=int, default=None, help="CPUs of a local Ray instance")
    parser.add_argument(
        "-o", "--output", default=None, help="the merged results (default RESULTS/merged.jsonl)"
    )
    parser.add_argument("--agenteval-gate", action="append", default=[], help="a gate for the merge")
    parser.add_argument("--agenteval-compare", default=None, help="a baseline results file for the merge")
    parser.add_argument("--junitxml", default=None, help="the merge's JUnit file")
    args = parser.parse_args(argv[:split])
    pytest_args = argv[split + 1 :]
    if args.shards < 1:
        parser.error(f"--shards {args.shards}: give at least 1")
    if not pytest_args:
        parser.error("no pytest arguments: give the shard's command line after --, e.g. -- suites/aime25 ...")
    for arg in pytest_args:
        if arg.split("=")[0] in _OWN_OPTIONS:
            parser.error(f"{arg.split('=')[0]} is set by run_shards.py for each shard: remove it after --")
    return args, pytest_args


def connect(args: argparse.Namespace) -> None:
    """The cluster named by --address or RAY_ADDRESS; neither: a new local instance."""
    if args.address or os.environ.get("RAY_ADDRESS"):
        ray.init(address=args.address, log_to_driver=False)
    else:
        ray.init(address="local", num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False)
    gpus = ray.cluster_resources().get("GPU", 0)
    if args.num_gpus > 0 and gpus < args.num_gpus:
        ray.shutdown()
        sys.exit(
            f"run_shards.py: the Ray cluster has {gpus:g} GPUs and each shard asks for {args.num_gpus:g} "
            "(--num-gpus): its tasks would never start; --num-gpus 0 runs the shards on CPUs"
        )


def run_all(args: argparse.Namespace, pytest_args: list[str]) -> list[ShardOutcome]:
    """Every shard, as Ray places them; an incomplete one again, up to --retries times."""
    task = run_shard.options(num_gpus=args.num_gpus)
    results = str(Path(args.results).resolve())

    def submit(index: int) -> ray.ObjectRef:
        return task.remote(index, args.shards, pytest_args, args.project_dir, results)

    running = {submit(index): 0 for index in range(args.shards)}  # task -> reruns so far
    finished: list[ShardOutcome] = []
    while running:
        [done], _ = ray.wait(list(running), num_returns=1)
        reruns = running.pop(done)
        outcome: ShardOutcome = ray.get(done)
        print(outcome.line(args.shards), flush=True)
        if rerun(outcome, reruns, args.retries):
            print(f"shard {outcome.index}/{args.shards}: running it again (the cache keeps what finished)")
            running[submit(outcome.index)] = reruns + 1
        else:
            finished.append(outcome)
    return sorted(finished, key=lambda outcome: outcome.index)


def merge(args: argparse.Namespace, outcomes: list[ShardOutcome]) -> int:
    output = args.output or str(Path(args.results) / "merged.jsonl")
    command = [
        sys.executable,
        "-m",
        "pytest_agenteval",
        "merge",
        *(o.results for o in outcomes),
        "-o",
        output,
    ]
    for gate in args.agenteval_gate:
        command += ["--agenteval-gate", gate]
    if args.agenteval_compare:
        command += ["--agenteval-compare", args.agenteval_compare]
    if args.junitxml:
        command += ["--junitxml", args.junitxml]
    return subprocess.run(command).returncode


def main(argv: Sequence[str] | None = None) -> int:
    args, pytest_args = parse_args(sys.argv[1:] if argv is None else argv)
    Path(args.results).mkdir(parents=True, exist_ok=True)
    connect(args)
    try:
        outcomes = run_all(args, pytest_args)
    finally:
        ray.shutdown()
    usage = [outcome for outcome in outcomes if outcome.exit_status == 4]
    if usage:  # every shard has the same command line and folders: no merge of nothing
        print(f"run_shards.py: {usage_line(usage[0])}", file=sys.stderr)
        return 4
    return merge(args, outcomes)


def usage_line(outcome: ShardOutcome) -> str:
    """Why a shard ended in a usage error: its folder missing, or pytest's own error lines."""
    if outcome.not_run:
        return outcome.not_run
    lines = Path(outcome.log).read_text(encoding="utf-8", errors="replace").splitlines()
    print("\n".join([line for line in lines if "error" in line.lower()] or lines[-3:]), file=sys.stderr)
    return f"pytest refused the shards' command line (exit 4; {outcome.log})"


if __name__ == "__main__":
    sys.exit(main())
