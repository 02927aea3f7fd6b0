"""What `pytest-agenteval merge` refuses, one line each with exit status 4: shards of
different splits, configurations, models, data or selections, a missing, duplicated or
conflicting shard, a file that is not a shard's, and bad options. The shards are real
runs; only the conflicting one is an edited file (two runs of one split cannot overlap)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import write_jsonl

from .conftest import AIME, PROBLEMS, aime_folder, aime_replay, merge_run, run_pytest

PREFIX = "pytest-agenteval merge: "


def shard(folder: Path, index: int, out: str, *args: str, count: int = 3) -> None:
    run_pytest(folder, *AIME, f"--agenteval-shard={index}/{count}", f"--agenteval-out={out}", *args)
    assert (folder / out).is_file()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = aime_folder(tmp_path_factory.mktemp("refusals"))
    for index in range(3):
        shard(folder, index, f"s{index}.jsonl")
    shard(folder, 0, "s0-again.jsonl")
    shard(folder, 0, "t0.jsonl", count=2)
    shard(folder, 1, "c1.jsonl", "--seed=7")
    shard(folder, 1, "k1.jsonl", "--", *(f"test_tiny.py::test_aime25[{p}]" for p in range(9)))
    run_pytest(folder, *AIME, "--agenteval-out=unsharded.jsonl")
    # the same paths and options in a sibling folder, with other contents behind them
    model = aime_folder(folder / "model", aime_replay({p: 2 for p in range(10)}))
    shard(model, 1, "m1.jsonl")
    shutil.copy(model / "m1.jsonl", folder / "m1.jsonl")
    data = aime_folder(folder / "data")
    write_jsonl(data / "tiny.jsonl", [{**p, "problem": p["problem"] + " Think."} for p in PROBLEMS])
    shard(data, 1, "d1.jsonl")
    shutil.copy(data / "d1.jsonl", folder / "d1.jsonl")
    # shard 1's file claiming one of shard 0's items too
    rows = [json.loads(line) for line in (folder / "s1.jsonl").read_text().splitlines()]
    for row in rows:
        if row["type"] == "summary":
            row["shard"]["items"].append("test_tiny.py::test_aime25[0]")
    write_jsonl(folder / "s1-conflict.jsonl", rows)
    (folder / "s2.jsonl.partial").write_text((folder / "s2.jsonl").read_text().splitlines()[0] + "\n")
    return folder


@pytest.mark.parametrize(
    ("files", "line"),
    [
        (
            ("s0.jsonl", "s2.jsonl"),
            "shard 1 of 3 missing: run --agenteval-shard 1/3 and pass its results file too",
        ),
        (
            ("s0.jsonl", "s1.jsonl", "s2.jsonl", "s0-again.jsonl"),
            "shard 0/3 is given twice: s0.jsonl and s0-again.jsonl; pass each shard's results file once",
        ),
        (
            ("s0.jsonl", "s1-conflict.jsonl", "s2.jsonl"),
            "s0.jsonl (shard 0/3) and s1-conflict.jsonl (shard 1/3) both hold test_tiny.py::test_aime25[0]: "
            "conflicting shards (not one split); rerun them from one command",
        ),
        (
            ("t0.jsonl", "s1.jsonl", "s2.jsonl"),
            "t0.jsonl (shard 0/2) and s1.jsonl (shard 1/3) come from different splits (into 2 and 3 shards); "
            "merge the shards of one split",
        ),
        (
            ("s0.jsonl", "c1.jsonl", "s2.jsonl"),
            "s0.jsonl (shard 0/3) and c1.jsonl (shard 1/3) have different configurations (--seed 42 vs 7); "
            "merge the shards of one evaluation",
        ),
        (
            ("s0.jsonl", "d1.jsonl", "s2.jsonl"),
            "s0.jsonl (shard 0/3) and d1.jsonl (shard 1/3) read different aime25 data; "
            "merge the shards of one dataset",
        ),
        (
            ("s0.jsonl", "k1.jsonl", "s2.jsonl"),
            "s0.jsonl (shard 0/3) and k1.jsonl (shard 1/3) split different selections (10 and 9 items: "
            "-k, -m, --limit or the data differ); merge the shards of one selection",
        ),
        (
            ("unsharded.jsonl", "s1.jsonl", "s2.jsonl"),
            "unsharded.jsonl: not a shard's results file (no shard object in its summary); merge the results "
            "files of runs with --agenteval-shard I/N",
        ),
        (
            ("s0.jsonl", "s1.jsonl", "s2.jsonl.partial"),
            "s2.jsonl.partial: no summary line: not a finished run's results file (a .partial file?); rerun "
            "that shard (the generation cache regenerates nothing finished)",
        ),
        (
            ("s0.jsonl", "s1.jsonl", "nowhere.jsonl"),
            "nowhere.jsonl: cannot read it (No such file or directory); pass the shards' results files",
        ),
        (
            ("s0.jsonl", "s1.jsonl", "s2.jsonl", "--agenteval-gate=aime25.average_at_n"),
            "--agenteval-gate 'aime25.average_at_n': expected SUITE.METRIC OP NUMBER, e.g. "
            '"aime25.average_at_n >= 0.30" (OP is one of >= > <= < == !=)',
        ),
        (
            ("s0.jsonl", "s1.jsonl", "s2.jsonl", "--agenteval-gate=aime25[base].average_at_n >= 0.3"),
            "--agenteval-gate 'aime25[base].average_at_n >= 0.3': names a model; a merge is of one "
            "model's shards: gate it as aime25.average_at_n ..., and compare the merged models with "
            "pytest-agenteval report",
        ),
        (
            ("s0.jsonl", "s1.jsonl", "s2.jsonl"),  # no -o
            "the following arguments are required: -o/--out (see pytest-agenteval merge --help)",
        ),
    ],
)
def test_a_merge_that_cannot_be_is_refused_in_one_line(
    folder: Path, files: tuple[str, ...], line: str
) -> None:
    out = () if "required" in line else ("-o", "merged.jsonl")
    done = merge_run(folder, *files, *out)
    assert (done.ret, done.err, done.out) == (4, PREFIX + line + "\n", "")
    assert not (folder / "merged.jsonl").exists()


def test_shards_of_another_model_are_refused_naming_what_differs(folder: Path) -> None:
    theirs = [json.loads(line) for line in (folder / "m1.jsonl").read_text().splitlines()][-1]["model"]
    ours = [json.loads(line) for line in (folder / "s0.jsonl").read_text().splitlines()][-1]["model"]
    assert ours["sha256"] != theirs["sha256"]  # the same name and path, other recorded generations
    done = merge_run(folder, "s0.jsonl", "m1.jsonl", "s2.jsonl", "-o", "merged.jsonl")
    line = (
        "s0.jsonl (shard 0/3) and m1.jsonl (shard 1/3) evaluated different models (replay-replay (replay): "
        f"sha256 {ours['sha256'][:16]!r} vs {theirs['sha256'][:16]!r}); merge the shards of one model"
    )
    assert (done.ret, done.err) == (4, PREFIX + line + "\n")


@pytest.mark.parametrize(
    ("out", "line"),
    [
        ("s1.jsonl", "-o s1.jsonl is one of the shards' results files; write the merge to a new file"),
        ("./s1.jsonl", "-o s1.jsonl is one of the shards' results files; write the merge to a new file"),
        (
            "unsharded.jsonl",
            "-o unsharded.jsonl is the --agenteval-compare baseline; write the merge to a new file",
        ),
    ],
)
def test_a_merge_never_writes_over_its_own_inputs(folder: Path, out: str, line: str) -> None:
    before = {name: (folder / name).read_bytes() for name in ("s1.jsonl", "unsharded.jsonl")}
    done = merge_run(
        folder, "s0.jsonl", "s1.jsonl", "s2.jsonl", "-o", out, "--agenteval-compare=unsharded.jsonl"
    )
    assert (done.ret, done.err, done.out) == (4, PREFIX + line + "\n", "")
    assert {name: (folder / name).read_bytes() for name in before} == before


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ("-o", "/proc/merged.jsonl"),
            "-o /proc/merged.jsonl: not writable (No such file or directory); choose a writable path",
        ),
        (
            ("-o", "merged.jsonl", "--junitxml", "/proc/x.xml"),
            "--junitxml /proc/x.xml: not writable (No such file or directory); choose a writable path",
        ),
    ],
)
def test_an_unwritable_output_is_refused_before_merging(
    folder: Path, args: tuple[str, ...], line: str
) -> None:
    done = merge_run(folder, "s0.jsonl", "s1.jsonl", "s2.jsonl", *args)
    assert (done.ret, done.err, done.out) == (4, PREFIX + line + "\n", "")
    assert not (folder / "merged.jsonl").exists()
