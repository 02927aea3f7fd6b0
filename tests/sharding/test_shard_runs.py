"""`--agenteval-shard` in real pytest runs: which items each shard runs (the same with and
without xdist, after -k), what its summary records, and its start-up errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import AIME, aime_folder, lines, run_pytest

NODE = "test_tiny.py::test_aime25[{}]"
SHARD_KEYS = {
    "index",
    "count",
    "config_hash",
    "model_hash",
    "data_hash",
    "selection_hash",
    "selected",
    "items",
    "explicit",
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return aime_folder(tmp_path_factory.mktemp("shards"))


def shard_of(folder: Path, out: str) -> dict:
    _, (summary,) = lines(folder / out)
    return summary["shard"]


@pytest.mark.parametrize("workers", ["0", "2"])
def test_three_shards_partition_the_items_round_robin(folder: Path, workers: str) -> None:
    expected = {0: [0, 3, 6, 9], 1: [1, 4, 7], 2: [2, 5, 8]}
    hashes = set()
    for index, problems in expected.items():
        out = f"s{index}-n{workers}.jsonl"
        done = run_pytest(
            folder, *AIME, f"--agenteval-shard={index}/3", f"--agenteval-out={out}", "-n", workers
        )
        if workers == "0":  # xdist's controller does not count its workers' deselections
            assert f", {10 - len(problems)} deselected in " in done.out.splitlines()[-1], done.out
        shard = shard_of(folder, out)
        assert set(shard) == SHARD_KEYS
        assert (shard["index"], shard["count"], shard["selected"]) == (index, 3, 10)
        assert shard["items"] == [NODE.format(p) for p in problems]
        records, _ = lines(folder / out)
        assert [r["problem_id"] for r in records] == problems
        hashes.add((shard["config_hash"], shard["model_hash"], shard["data_hash"], shard["selection_hash"]))
    assert len(hashes) == 1  # one evaluation: the same hashes in every shard


def test_the_split_is_over_what_k_selected(folder: Path) -> None:
    done = run_pytest(folder, *AIME, "-k", "not 1", "--agenteval-shard=0/3", "--agenteval-out=k.jsonl")
    assert ", 7 deselected in " in done.out.splitlines()[-1], done.out
    shard = shard_of(folder, "k.jsonl")
    # the 9 selected, [0, 2, 3, 4, 5, 6, 7, 8, 9], dealt to 3 shards: every third from the first
    assert (shard["selected"], shard["items"]) == (9, [NODE.format(p) for p in (0, 4, 7)])


def test_auto_reads_the_slurm_array(folder: Path) -> None:
    env = {"SLURM_ARRAY_TASK_ID": "6", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "5"}
    done = run_pytest(folder, *AIME, "--agenteval-shard=auto", "--agenteval-out=slurm.jsonl", env=env)
    assert done.ret == 1, done.out  # unsolved problems, no gate
    shard = shard_of(folder, "slurm.jsonl")
    assert (shard["index"], shard["count"], shard["items"]) == (1, 3, [NODE.format(p) for p in (1, 4, 7)])


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.parametrize(
    ("env", "count", "index"),
    [
        # --array=0-6:2, task 6: (6 - 0) / 2 = shard 3 of 4
        (
            {
                "SLURM_ARRAY_TASK_ID": "6",
                "SLURM_ARRAY_TASK_COUNT": "4",
                "SLURM_ARRAY_TASK_MIN": "0",
                "SLURM_ARRAY_TASK_STEP": "2",
            },
            (),
            3,
        ),
        # sbatch --array=2 resubmitted with the count: a one-task array, shard 2 of 4
        (
            {
                "SLURM_ARRAY_TASK_ID": "2",
                "SLURM_ARRAY_TASK_COUNT": "1",
                "SLURM_ARRAY_TASK_MIN": "2",
                "SLURM_ARRAY_TASK_STEP": "1",
            },
            ("--agenteval-shard-count=4",),
            2,
        ),
    ],
    ids=["stepped-array", "resubmitted-index"],
)
def test_auto_reads_a_stepped_or_resubmitted_slurm_task(
    folder: Path, env: dict[str, str], count: tuple[str, ...], index: int, workers: str
) -> None:
    out = f"slurm-{index}-{workers}.jsonl"
    done = run_pytest(
        folder, *AIME, "--agenteval-shard=auto", *count, f"--agenteval-out={out}", "-n", workers, env=env
    )
    assert done.ret in (0, 1), done.out + done.err
    shard = shard_of(folder, out)
    items = [NODE.format(p) for p in range(index, 10, 4)]
    assert (shard["index"], shard["count"], shard["items"]) == (index, 4, items)


def test_auto_reads_a_kubernetes_indexed_job(folder: Path) -> None:
    done = run_pytest(
        folder,
        *AIME,
        "--agenteval-shard=auto",
        "--agenteval-shard-count=3",
        "--agenteval-out=k8s.jsonl",
        "-n",
        "2",
        env={"JOB_COMPLETION_INDEX": "2"},
    )
    assert done.ret == 1, done.out
    assert shard_of(folder, "k8s.jsonl")["items"] == [NODE.format(p) for p in (2, 5, 8)]


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ("--agenteval-shard=3/2",),
            "ERROR: --agenteval-shard 3/2: shard 3 of 2 does not exist; shards are numbered 0 to 1",
        ),
        (
            ("--agenteval-shard=auto",),
            "ERROR: --agenteval-shard auto: no scheduler found: looked for SLURM_ARRAY_TASK_ID and "
            "SLURM_ARRAY_TASK_COUNT (a SLURM array) and JOB_COMPLETION_INDEX (a Kubernetes Indexed Job); "
            "pass --agenteval-shard I/N outside them",
        ),
        (
            ("--agenteval-shard=0/20",),
            "ERROR: --agenteval-shard 0/20: fewer items are selected than the 20 shards; "
            "use at most as many shards as selected items",
        ),
    ],
)
def test_a_bad_shard_stops_the_run_before_any_request(
    folder: Path, args: tuple[str, ...], line: str, workers: str
) -> None:
    done = run_pytest(folder, *AIME, *args, "--agenteval-out=bad.jsonl", "-n", workers)
    assert done.ret == 4
    assert line in done.err.splitlines(), done.err
    assert not (folder / "bad.jsonl").exists()
