"""The merge at scale, measured in miniature (issue 26 item 7): `pytest-agenteval merge`
on synthetic shards of one selection, its wall time and peak RSS at several sizes.

    python benchmarks/merge_scale.py                      # 64 shards x 1,600 problems x 16 samples
    python benchmarks/merge_scale.py --shards 8 16 32 64  # the growth, smallest first
    python benchmarks/merge_scale.py --shards 2 4 --problems 400 --repeat 3

The records are replayed, not invented: a small real run (AIME text-only, 16 samples, 4
problems, against the package's test server answering ~--text-bytes of reasoning ending
in a boxed answer) gives the problem lines and the summary; each shard file repeats them
with new problem ids, indices, node ids and per-sample seeds and latencies, and carries a
shard object of one selection of SHARDS x PROBLEMS items (one `selection_hash`), so the
merge accepts and merges the files as it would a cluster's. The merge runs as a
subprocess, as a user runs it; its peak RSS is the child's own (`os.wait4`'s ru_maxrss),
its floor the same interpreter importing the merge and exiting.

Reported per size: generations, shard bytes, wall time and peak RSS (min and median of
--repeat), per-generation time, the peak above the floor per generation, and the peak
against the shard bytes. Shard files are written under --workdir (default: a temporary
folder beside the repository's, removed at the end; a 64-shard set is ~13 GB, and the
merged file as much again, removed after each merge)."""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_agenteval.api.records import sample_seed  # noqa: E402
from pytest_agenteval.output.summary import selection_hash  # noqa: E402
from pytest_agenteval.testing import OpenAITestServer, ServerConfig  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
for _name in ("GITHUB_STEP_SUMMARY", "JOB_COMPLETION_INDEX"):
    ENV.pop(_name, None)
SUITE_FILE = """
from pytest_agenteval.tasks.aime25 import Aime25

agenteval_suite = Aime25()


def test_aime25(evaluation):
    evaluation.check()
"""
TEMPLATE_PROBLEMS = 4  # problem p asks p + p; the server always answers 4: problem 2 is solved
GATE = "aime25.pass_at_n >= 0.0"  # holds: a merge that completes exits 0


def reasoning(text_bytes: int) -> str:
    """A server answer of about `text_bytes`: numbered reasoning lines (the sample's seed
    in the first, so no two generations are alike), then the boxed answer."""
    line = "Step {k}: carry the sum forward and check it against the previous step once more.\n"
    steps = "".join(line.replace("{k}", str(k)) for k in range(max(1, text_bytes // len(line))))
    return "Sample seed {seed}.\n" + steps + "So \\boxed{4}."


def real_run(folder: Path, samples: int, text_bytes: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The problem lines and the summary of a real one-shard run of the template."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test_tiny.py").write_text(SUITE_FILE)
    problems = [
        {"id": p, "problem": f"What is {p} + {p}?", "answer": str(2 * p)} for p in range(TEMPLATE_PROBLEMS)
    ]
    (folder / "tiny.jsonl").write_text("".join(json.dumps(p) + "\n" for p in problems))
    with OpenAITestServer(ServerConfig(answer=reasoning(text_bytes))) as server:
        options = [f"--val-n={samples}", f"--endpoint={server.url}", "--agenteval-shard=0/1"]
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-q"]
        command += ["--dataset-path=tiny.jsonl", "--mode=text-only", *options, "--agenteval-out=real.jsonl"]
        done = subprocess.run(command, cwd=folder, env=ENV, capture_output=True, text=True, timeout=600)
    path = folder / "real.jsonl"
    if not path.is_file():
        raise SystemExit(
            f"the template run wrote no results (exit {done.returncode}):\n{done.stdout}{done.stderr}"
        )
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [r for r in rows if r["type"] == "problem"], next(r for r in rows if r["type"] == "summary")


def nodeid_of(template: str, problem_id: int) -> str:
    return f"{template.rsplit('[', 1)[0]}[{problem_id}]"


def replicated(template: dict[str, Any], problem_id: int, seed: int, rng: random.Random) -> dict[str, Any]:
    """The template line as problem `problem_id`'s: its ids, seeds and latencies its own."""
    generations = []
    for generation in template["generations"]:
        j = generation["sample_index"]
        generations.append(
            {
                **generation,
                "seed": sample_seed(seed, problem_id, j),
                "latency_s": round(rng.uniform(0.5, 90.0), 4),
            }
        )
    return {
        **template,
        "problem_id": problem_id,
        "index": problem_id,
        "nodeid": nodeid_of(template["nodeid"], problem_id),
        "problem": f"What is {problem_id} + {problem_id}?",
        "generations": generations,
    }


def shard_problems(shards: int, problems: int, index: int) -> range:
    return range(index, shards * problems, shards)  # interleaved, as a balanced split is


def write_shards(
    folder: Path, templates: Sequence[dict[str, Any]], summary: dict[str, Any], shards: int, problems: int
) -> list[Path]:
    """SHARDS files of PROBLEMS lines each, plus each one's summary with its shard object."""
    node = templates[0]["nodeid"]
    everything = selection_hash(nodeid_of(node, p) for p in range(shards * problems))
    seed = int(summary["config"].get("seed") or 0)
    rng = random.Random(26)
    paths = []
    for index in range(shards):
        ids = shard_problems(shards, problems, index)
        path = folder / f"shard-{index:03d}.jsonl"
        with path.open("w", encoding="utf-8") as handle:
            for p in ids:
                handle.write(json.dumps(replicated(templates[p % len(templates)], p, seed, rng)) + "\n")
            shard = {
                **summary["shard"],
                "index": index,
                "count": shards,
                "selection_hash": everything,
                "selected": shards * problems,
                "items": [nodeid_of(node, p) for p in ids],
            }
            handle.write(json.dumps({**summary, "shard": shard}) + "\n")
        paths.append(path)
    return paths


def measured(command: Sequence[str], cwd: Path) -> tuple[float, float, float]:
    """(wall seconds, peak RSS in MB, CPU seconds) of that child alone."""
    started = time.perf_counter()
    child = subprocess.Popen(command, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    error = child.stderr.read().decode() if child.stderr else ""
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])}... exited {child.returncode}: {error.strip()[-2000:]}")
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def floor(cwd: Path) -> float:
    """Peak RSS of the interpreter importing the merge and exiting (the start-up floor)."""
    return min(
        measured([sys.executable, "-c", "import pytest_agenteval.output.merge"], cwd)[1] for _ in range(3)
    )


def merge_once(folder: Path, paths: Sequence[Path]) -> tuple[float, float, float, int]:
    out = folder / "merged.jsonl"
    command = [sys.executable, "-m", "pytest_agenteval", "merge", *map(str, paths), "-o", str(out)]
    wall, peak, cpu = measured([*command, "--agenteval-gate", GATE], folder)
    lines = sum(1 for _ in out.open("rb"))
    out.unlink()
    return wall, peak, cpu, lines


def sizes(args: argparse.Namespace) -> Iterator[tuple[int, int, int]]:
    for shards in sorted(args.shards):
        yield shards, args.problems, args.samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shards", type=int, nargs="+", default=[64], help="shard counts, one size each")
    parser.add_argument("--problems", type=int, default=1600, help="problems per shard")
    parser.add_argument("--samples", type=int, default=16, help="generations per problem (--val-n)")
    parser.add_argument("--text-bytes", type=int, default=8192, help="text per generation")
    parser.add_argument("--repeat", type=int, default=1, help="merges per size (min and median reported)")
    parser.add_argument("--workdir", type=Path, default=None, help="where the shard files go")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="merge-scale-", dir=args.workdir))
    rows = []
    try:
        templates, summary = real_run(work, args.samples, args.text_bytes)
        base = floor(work)
        load = f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
        print(f"template: {len(templates)} real lines x {args.samples} samples; floor {base:.1f} MB; {load}")
        for shards, problems, samples in sizes(args):
            for old in work.glob("shard-*.jsonl"):
                old.unlink()
            paths = write_shards(work, templates, summary, shards, problems)
            total = sum(p.stat().st_size for p in paths)
            runs = [merge_once(work, paths) for _ in range(args.repeat)]
            expected = shards * problems + 1  # every problem line and the one summary
            assert all(r[3] == expected for r in runs), (runs, expected)
            rows.append(row(shards, problems, samples, total, runs, base))
            print(json.dumps(rows[-1]), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


def row(
    shards: int,
    problems: int,
    samples: int,
    total: int,
    runs: Sequence[tuple[float, float, float, int]],
    base: float,
) -> dict[str, Any]:
    walls = [r[0] for r in runs]
    peaks = [r[1] for r in runs]
    cpus = [r[2] for r in runs]
    generations = shards * problems * samples
    peak = statistics.median(peaks)
    return {
        "shards": shards,
        "problems": shards * problems,
        "generations": generations,
        "shard_mb": round(total / 2**20, 1),
        "wall_s_min": round(min(walls), 2),
        "wall_s_median": round(statistics.median(walls), 2),
        "cpu_s_min": round(min(cpus), 2),
        "cpu_s_median": round(statistics.median(cpus), 2),
        "peak_rss_mb_min": round(min(peaks), 1),
        "peak_rss_mb_median": round(peak, 1),
        "floor_mb": round(base, 1),
        "us_per_generation": round(min(walls) / generations * 1e6, 2),
        "cpu_us_per_generation": round(min(cpus) / generations * 1e6, 2),
        "us_per_shard_mb": round(min(walls) / (total / 2**20) * 1e6, 0),
        "peak_above_floor_bytes_per_generation": round((min(peaks) - base) * 2**20 / generations, 1),
        "peak_over_shard_bytes": round(min(peaks) * 2**20 / total, 4),
        "load": round(os.getloadavg()[0], 2),
    }


if __name__ == "__main__":
    sys.exit(main())
