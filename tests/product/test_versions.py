"""Suite versions (issue 33): every summary line records `suite_version`, and `report`,
`merge` and `--agenteval-compare` refuse runs of two versions in one line naming both,
unless a flag allows it, which the output then says. `pytest-agenteval list` shows each
version, offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agenteval.cli import main as cli
from pytest_agenteval.tasks.aime25 import Aime25
from tests.sharding.conftest import aime_folder, lines, merge_run, run_pytest

AIME = ("--dataset-path=tiny.jsonl", "--mode=text-only", "--model-path=replay:replay.jsonl", "--val-n=2")


def _as_version(path: Path, version: str) -> Path:
    """The same results file, as a run of another version of its suite would have it."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        if row["type"] == "summary":
            row["suite_version"] = version
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two whole runs (a.jsonl, b.jsonl) and two shards (s0, s1) of one replayed AIME run."""
    folder = aime_folder(tmp_path_factory.mktemp("versions"))
    for out in ("a", "b"):
        assert run_pytest(folder, *AIME, f"--agenteval-out={out}.jsonl").ret == 1
    for index in (0, 1):
        shard = (f"--agenteval-shard={index}/2", f"--agenteval-out=s{index}.jsonl")
        assert run_pytest(folder, *AIME, *shard).ret in (0, 1)
    return folder


def test_every_results_line_records_the_suite_version(runs: Path) -> None:
    problems, (summary,) = lines(runs / "a.jsonl")
    assert summary["suite_version"] == Aime25.version == "1"
    assert [p["suite_version"] for p in problems] == ["1"] * len(problems) and problems


def test_report_refuses_two_versions_unless_allow_mixed(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = tmp_path / "old.jsonl"
    old.write_text((runs / "a.jsonl").read_text())
    _as_version(old, "0")
    assert cli(["report", str(old), str(runs / "b.jsonl")]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "pytest-agenteval report: runs are not comparable: aime25 version differs: b.jsonl has version 1, "
        "old.jsonl has version 0; pass --allow-mixed to compare them anyway"
    )
    md = tmp_path / "r.md"
    assert cli(["report", str(old), str(runs / "b.jsonl"), "--allow-mixed", "--markdown", str(md)]) == 0
    assert "**Mixed runs** (--allow-mixed): aime25 version differs" in md.read_text()


def test_compare_refuses_a_baseline_of_another_version_unless_allowed(runs: Path) -> None:
    baseline = runs / "baseline-v0.jsonl"
    baseline.write_text((runs / "a.jsonl").read_text())
    _as_version(baseline, "0")
    refused = run_pytest(runs, *AIME, f"--agenteval-compare={baseline.name}", "--agenteval-out=c.jsonl")
    assert refused.ret == 4
    assert (
        "ERROR: --agenteval-compare baseline-v0.jsonl: not comparable: aime25 version differs: this run has "
        "version 1, the baseline has version 0 (its prompt, scorer or metrics changed); give a baseline of "
        "this version, or pass --agenteval-allow-version-change"
    ) in refused.err
    allowed = run_pytest(
        runs,
        *AIME,
        f"--agenteval-compare={baseline.name}",
        "--agenteval-allow-version-change",
        "--agenteval-out=d.jsonl",
    )
    assert allowed.ret == 0  # the comparison decides (no drop against the same generations)
    assert (
        "agenteval: --agenteval-allow-version-change: comparing across versions: aime25 version differs: "
        "this run has version 1, the baseline has version 0"
    ) in allowed.err


def test_merge_refuses_shards_of_two_versions_and_another_installed_version(runs: Path) -> None:
    for name, version in (("v0-s0.jsonl", "0"), ("v1-s1.jsonl", "1"), ("v0-s1.jsonl", "0")):
        (runs / name).write_text((runs / f"s{name[-7]}.jsonl").read_text())
        _as_version(runs / name, version)
    mixed = merge_run(runs, "v0-s0.jsonl", "v1-s1.jsonl", "-o", "m.jsonl")
    assert mixed.ret == 4
    assert mixed.err.strip() == (
        "pytest-agenteval merge: v0-s0.jsonl (shard 0/2) and v1-s1.jsonl (shard 1/2) ran aime25 version 0 "
        "and version 1; merge the shards of one version"
    )
    older = merge_run(runs, "v0-s0.jsonl", "v0-s1.jsonl", "-o", "m.jsonl")
    assert older.ret == 4
    assert older.err.strip() == (
        "pytest-agenteval merge: the shards ran aime25 version 0, this installation's aime25 is version 1 "
        "(its prompt, scorer or metrics changed); merge with the version that ran them, or pass "
        "--allow-version-change to recompute with this one"
    )
    allowed = merge_run(runs, "v0-s0.jsonl", "v0-s1.jsonl", "-o", "m.jsonl", "--allow-version-change")
    assert allowed.ret == 1
    assert "--allow-version-change: the shards ran aime25 version 0" in allowed.err
    assert lines(runs / "m.jsonl")[1][0]["suite_version"] == "1"


def test_list_shows_each_suite_offline(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert cli(["list"]) == 0
    text = capsys.readouterr().out
    assert "  aime25  (version 1)  AIME 2025" in text
    assert "    size        30 (AIME I and II, 15 problems each)" in text
    assert "    run         pytest --pyargs pytest_agenteval.suites.bfcl" in text
    assert "    size        from the hub (gated: HF_TOKEN), or --gaia-path DIR" in text
    assert "    levels      level1, level2, level3" in text
    assert "Qwen/Qwen3-4B: aime25.average_at_n 0.656, N=64 (Qwen3 Technical Report" in text
    assert cli(["list", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    by_name = {s["name"]: s for s in data["suites"]}
    assert list(by_name) == ["aime25", "bfcl", "gaia", "datagen"]
    assert (by_name["aime25"]["default_n"], by_name["bfcl"]["default_n"]) == (12, 1)
    assert by_name["gaia"]["size"] is None and "irrelevance" in by_name["bfcl"]["markers"]
    assert {p["name"] for p in data["presets"]} >= {"qwen3-thinking", "deepseek-r1"}
    assert any(b["option"] == "--endpoint URL" and b["installed"] for b in data["backends"])


def _unversioned(path: Path) -> Path:
    """The same results file as a run from before suite versions wrote it."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k != "suite_version"}) + "\n" for r in rows)
    )
    return path


def test_a_file_from_before_versions_is_compared_unchecked_and_says_so(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = tmp_path / "old.jsonl"
    old.write_text((runs / "a.jsonl").read_text())
    _unversioned(old)
    assert cli(["report", str(old), str(runs / "b.jsonl"), "--markdown", str(tmp_path / "r.md")]) == 0
    assert capsys.readouterr().err.strip().splitlines()[0] == (
        "pytest-agenteval report: old.jsonl records no aime25 version (written before suite versions): "
        "compared with version 1 unchecked"
    )
    baseline = runs / "baseline-unversioned.jsonl"
    baseline.write_text((runs / "a.jsonl").read_text())
    _unversioned(baseline)
    compared = run_pytest(runs, *AIME, f"--agenteval-compare={baseline.name}", "--agenteval-out=e.jsonl")
    assert compared.ret == 0
    assert (
        "agenteval: --agenteval-compare baseline-unversioned.jsonl records no aime25 version (written before "
        "suite versions): compared with version 1 unchecked"
    ) in compared.err
    for index in (0, 1):
        (runs / f"old-s{index}.jsonl").write_text((runs / f"s{index}.jsonl").read_text())
        _unversioned(runs / f"old-s{index}.jsonl")
    merged = merge_run(runs, "old-s0.jsonl", "old-s1.jsonl", "-o", "m-old.jsonl")
    assert merged.ret == 1
    assert (
        "pytest-agenteval merge: old-s0.jsonl (shard 0/2) records no aime25 version (written before suite "
        "versions): merged with version 1 unchecked"
    ) in merged.err
