"""THE merge-equality test (issue 26 item 2): AIME (text-only), BFCL and GAIA items run
unsharded with -n 0 and -n 2, then as 4 shards (two with -n 0, one with -n 2, one with -n 1) merged by
`pytest-agenteval merge`: the same problem lines, every summary field equal but the
run-local ones (`RUN_LOCAL_FIELDS`, and the run-local options in `config`), the same
JUnit for the agenteval parts, the same job summary and exit status."""

from __future__ import annotations

import importlib.util
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.config.table import OPTIONS
from pytest_agenteval.output.summary import RUN_LOCAL_FIELDS
from tests._oracle import require_oracle
from tests.conftest import write_jsonl
from tests.gaia import make_synthetic

from .conftest import aime_folder, aime_replay, lines, merge_run, run_pytest

GATES = ("aime25.average_at_n >= 0.25", "bfcl.accuracy >= 0.5", "gaia.accuracy >= 0.1")
LOCAL_OPTIONS = {o.dest for o in OPTIONS if o.local}
SHARDS = 4


def _bfcl(folder: Path) -> tuple[list[str], list[dict[str, Any]]]:
    if importlib.util.find_spec("bfcl_eval") is None:  # an oracle: fails under AGENTEVAL_CI=1
        require_oracle("BFCL data comes with bfcl-eval (README command 1)")
    pytest.importorskip("tree_sitter", reason="BFCL needs: pip install -e '.[bfcl]'")
    from pytest_agenteval.tasks.bfcl import load_bfcl
    from tests.suites.test_bfcl_suite import SUITE, oracle_text

    (folder / "test_bfcl.py").write_text(SUITE)
    simple, irrelevant = load_bfcl(["simple_python"])[:4], load_bfcl(["irrelevance"])[:3]
    texts = [oracle_text(simple[0]), oracle_text(simple[1]), "no call", oracle_text(simple[3])]
    texts += ["None of these fit.", oracle_text(simple[0]), "No call is needed."]
    ids = [e.id for e in simple + irrelevant]
    rows = [{"problem_id": i, "sample_index": 0, "text": t} for i, t in zip(ids, texts, strict=True)]
    return [f"test_bfcl.py::test_bfcl[{i}]" for i in ids], rows


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, small_bfcl_dir: Path) -> dict[str, Any]:
    folder = aime_folder(tmp_path_factory.mktemp("equality"))
    bfcl_items, bfcl_rows = _bfcl(folder)
    # the 7 items are among each file's first 5: every run (here and in each of the 5 xdist
    # workers) parses and collects the small copy of the data, not all 10,306 entries
    from tests.suites.test_gaia_suite import SUITE as GAIA_SUITE

    (folder / "test_gaia.py").write_text(GAIA_SUITE)
    root = make_synthetic.make_synthetic_gaia(folder / "GAIA", "jsonl")
    gaia = make_synthetic.write_replay(folder / "gaia-replay.jsonl").read_text().splitlines()
    import json

    gaia_rows = [json.loads(line) for line in gaia]
    write_jsonl(folder / "replay.jsonl", aime_replay({}) + bfcl_rows + gaia_rows)
    common = (
        "test_tiny.py",
        "test_gaia.py",
        *bfcl_items,
        "--dataset-path=tiny.jsonl",
        "--mode=text-only",
        f"--gaia-path={root}",
        f"--bfcl-data-dir={small_bfcl_dir}",
        "--model-path=replay:replay.jsonl",
    )
    gates = [f"--agenteval-gate={g}" for g in GATES]
    made: dict[str, Any] = {"folder": folder}
    for name, workers in (("n0", "0"), ("n2", "2")):
        env = {"GITHUB_STEP_SUMMARY": str(folder / f"{name}.md")}
        made[name] = run_pytest(
            folder,
            *common,
            *gates,
            "-n",
            workers,
            f"--agenteval-out={name}.jsonl",
            f"--junitxml={name}.xml",
            env=env,
        )
    for index in range(SHARDS):
        workers = ("0", "0", "2", "1")[index]  # the workers summed: 3, neither their most nor a count
        run_pytest(
            folder,
            *common,
            f"--agenteval-shard={index}/{SHARDS}",
            "-n",
            workers,
            f"--agenteval-out=s{index}.jsonl",
        )
    env = {"GITHUB_STEP_SUMMARY": str(folder / "merged.md")}
    shards = [f"s{i}.jsonl" for i in range(SHARDS)]
    made["merged"] = merge_run(
        folder, *shards, "-o", "merged.jsonl", *gates, "--junitxml=merged.xml", env=env
    )
    return made


def differing(a: dict[str, Any], b: dict[str, Any]) -> set[str]:
    fields = {k for k in set(a) | set(b) if a.get(k) != b.get(k)}
    config = {k for k in set(a["config"]) | set(b["config"]) if a["config"].get(k) != b["config"].get(k)}
    assert config <= LOCAL_OPTIONS, config  # only where and how each run did its work
    return fields - {"config"}


@pytest.mark.parametrize("other", ["n2", "merged"])
def test_the_problem_lines_are_the_unsharded_runs(runs, other: str) -> None:
    folder = runs["folder"]
    expected, _ = lines(folder / "n0.jsonl")
    assert [r["suite"] for r in expected].count("bfcl") == 7 and len(expected) == 29
    assert lines(folder / f"{other}.jsonl")[0] == expected


@pytest.mark.parametrize("other", ["n2", "merged"])
def test_every_summary_field_but_the_run_local_ones_is_the_unsharded_runs(runs, other: str) -> None:
    folder = runs["folder"]
    _, expected = lines(folder / "n0.jsonl")
    _, summaries = lines(folder / f"{other}.jsonl")
    assert [s["suite"] for s in summaries] == ["aime25", "bfcl", "gaia"]
    for mine, theirs in zip(summaries, expected, strict=True):
        assert differing(mine, theirs) <= set(RUN_LOCAL_FIELDS), differing(mine, theirs)
    assert {k: summaries[1][k] for k in ("accuracy", "per_category", "groups")} == {
        k: expected[1][k] for k in ("accuracy", "per_category", "groups")
    }


def test_the_run_local_fields_are_the_ones_that_differ(runs) -> None:
    """The list says why each differs: the merge's own timing, memory and workers, and its
    provenance (`merged`) where a shard has its `shard`."""
    folder = runs["folder"]
    _, (unsharded, *_) = lines(folder / "n0.jsonl")
    _, (merged, *_) = lines(folder / "merged.jsonl")
    _, (shard, *_) = lines(folder / "s0.jsonl")
    assert differing(merged, unsharded) >= {"harness", "workers", "merged", "duration_s"}
    assert "shard" in shard and "shard" not in unsharded and "shard" not in merged
    assert merged["merged"]["shards"] == SHARDS and merged["merged"]["selected"] == 29
    assert merged["workers"] == 3  # 0 + 0 + 2 + 1


def test_the_exit_status_and_the_gates_are_the_unsharded_runs(runs) -> None:
    folder = runs["folder"]
    assert runs["n0"].ret == runs["n2"].ret == runs["merged"].ret == 0, runs["merged"].err
    _, unsharded = lines(folder / "n0.jsonl")
    _, merged = lines(folder / "merged.jsonl")
    assert [s["gates"] for s in merged] == [s["gates"] for s in unsharded]
    gate_lines = [line for line in runs["merged"].out.splitlines() if line.startswith("gate ")]
    assert gate_lines == [line for line in runs["n0"].out.splitlines() if line.startswith("gate ")]
    assert len(gate_lines) == 3


def junit(path: Path) -> tuple[dict[tuple[str, str], Any], list[tuple[str, str]]]:
    """The agenteval parts: each testcase's properties and outcome, the suite properties."""
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    cases = {}
    for case in suite.iter("testcase"):
        properties = tuple((p.get("name"), p.get("value")) for p in case.iter("property"))
        outcome = [(child.tag, child.get("type")) for child in case if child.tag != "properties"]
        cases[(case.get("classname"), case.get("name"))] = (properties, outcome)
    top = suite.find("properties")
    return cases, [(p.get("name"), p.get("value")) for p in (top if top is not None else [])]


@pytest.mark.parametrize("other", ["n2", "merged"])
def test_the_junit_file_is_the_unsharded_runs(runs, other: str) -> None:
    folder = runs["folder"]
    expected_cases, expected_properties = junit(folder / "n0.xml")
    cases, properties = junit(folder / f"{other}.xml")
    assert cases == expected_cases
    assert properties == expected_properties
    assert len(cases) == 29 + 3  # the items and the gates


def test_the_job_summary_is_the_unsharded_runs(runs) -> None:
    folder = runs["folder"]
    expected = (folder / "n0.md").read_text()
    assert "### Gates" in expected
    assert (folder / "merged.md").read_text() == expected
