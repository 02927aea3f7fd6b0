"""The exit status of `pytest-agenteval merge`: docs/ci.md's table, each cell a real merge
of real shards; and an incomplete shard rerun (the cache and the server's second
attempts finish it) that then merges green."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agenteval.testing import OpenAITestServer, ServerConfig

from .conftest import AIME, aime_folder, aime_replay, lines, merge_run, run_pytest

REPO = Path(__file__).resolve().parents[2]
GATES = {"no gate": (), "a gate that holds": ("--agenteval-gate=aime25.pass_at_n >= 0.1",)}
GATES["a gate that fails"] = ("--agenteval-gate=aime25.average_at_n > 1",)
HOLDINGS = {
    "every problem solved": aime_replay({p: 2 for p in range(10)}),
    "only unsolved problems": aime_replay({}),
    "an incomplete shard (items errored or missing)": aime_replay({}, skip=(4,)),
}


@pytest.fixture(scope="module")
def shard_sets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    made = {}
    for number, (holding, replay) in enumerate(HOLDINGS.items()):
        folder = aime_folder(tmp_path_factory.mktemp(f"exit{number}"), replay)
        for index in range(3):
            run_pytest(folder, *AIME, f"--agenteval-shard={index}/3", f"--agenteval-out=s{index}.jsonl")
        made[holding] = folder
    return made


def measured(shard_sets: dict[str, Path]) -> dict[str, tuple[int, ...]]:
    table = {}
    for holding, folder in shard_sets.items():
        shards = ("s0.jsonl", "s1.jsonl", "s2.jsonl")
        table[holding] = tuple(merge_run(folder, *shards, "-o", "m.jsonl", *g).ret for g in GATES.values())
    solved = shard_sets["every problem solved"]  # shard 2 left out
    refused = tuple(
        merge_run(solved, "s0.jsonl", "s1.jsonl", "-o", "m.jsonl", *g).ret for g in GATES.values()
    )
    table["shards that cannot be merged (refused in one line)"] = refused
    return table


def documented() -> dict[str, tuple[int, ...]]:
    text = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    section = text.split("## Exit status of `pytest-agenteval merge`", 1)[1].split("\n## ", 1)[0]
    table = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[1].isdigit():
            table[cells[0]] = tuple(int(c) for c in cells[1:])
    return table


def test_the_docs_table_is_the_measured_one(shard_sets: dict[str, Path]) -> None:
    assert documented() == {
        "every problem solved": (0, 0, 1),
        "only unsolved problems": (1, 0, 1),
        "an incomplete shard (items errored or missing)": (1, 1, 1),
        "shards that cannot be merged (refused in one line)": (4, 4, 4),
    }
    assert measured(shard_sets) == documented()


def test_an_incomplete_shard_fails_the_gate_closed_until_it_is_rerun(tmp_path: Path) -> None:
    folder = aime_folder(tmp_path / "rerun")
    gate = "--agenteval-gate=aime25.pass_at_n >= 0.05"
    common = ("--dataset-path=tiny.jsonl", "--mode=text-only", "--val-n=1", "--max-attempts=1")
    common += ("--agenteval-cache-dir=cache", "--max-tokens=32")
    with (
        OpenAITestServer(ServerConfig(answer="so \\boxed{0}")) as healthy,
        OpenAITestServer(ServerConfig(answer="so \\boxed{0}", fail_first_k_attempts_per_request=1)) as flaky,
    ):
        for index, server in ((0, healthy), (1, flaky), (2, healthy)):
            run_pytest(
                folder,
                *common,
                f"--endpoint={server.url}",
                f"--agenteval-shard={index}/3",
                f"--agenteval-out=s{index}.jsonl",
            )
        _, (broken,) = lines(folder / "s1.jsonl")
        assert (broken["complete"], broken["incomplete"]) == (False, "3 of 3 problems errored, 0 missing")
        first = merge_run(folder, "s0.jsonl", "s1.jsonl", "s2.jsonl", "-o", "m.jsonl", gate)
        assert first.ret == 1
        assert (
            "gate FAIL  aime25.pass_at_n >= 0.05  (run incomplete (3 of 10 problems errored, 0 missing): "
            "gates fail closed)"
        ) in first.out.splitlines()
        before = healthy.stats()["total_requests"]
        rerun = run_pytest(
            folder, *common, f"--endpoint={flaky.url}", "--agenteval-shard=1/3", "--agenteval-out=s1.jsonl"
        )
        assert rerun.ret == 1, rerun.out  # its own unsolved problems, no gate
        again = run_pytest(
            folder, *common, f"--endpoint={healthy.url}", "--agenteval-shard=0/3", "--agenteval-out=s0.jsonl"
        )
        assert healthy.stats()["total_requests"] == before  # a finished shard reruns from the cache
        assert "4 of 4 generations from the cache" in again.out
    second = merge_run(folder, "s0.jsonl", "s1.jsonl", "s2.jsonl", "-o", "m.jsonl", gate)
    assert second.ret == 0, second.out + second.err
    line = "gate PASS  aime25.pass_at_n >= 0.05  (0.1000 >= 0.05 holds, a point comparison)"
    assert line in second.out.splitlines()


def test_the_baseline_comparison_of_a_merge_is_the_unsharded_runs(shard_sets: dict[str, Path]) -> None:
    solved, mixed = shard_sets["every problem solved"], shard_sets["only unsolved problems"]
    run_pytest(solved, *AIME, "--agenteval-out=baseline.jsonl")
    baseline = f"--agenteval-compare={solved / 'baseline.jsonl'}"
    # --val-n: the run's start-up check reads N from the options (the merge from the records)
    unsharded = run_pytest(mixed, *AIME, baseline, "--val-n=2", "--agenteval-out=unsharded.jsonl")
    merged = merge_run(mixed, "s0.jsonl", "s1.jsonl", "s2.jsonl", "-o", "compared.jsonl", baseline)
    _, (expected,) = lines(mixed / "unsharded.jsonl")
    _, (summary,) = lines(mixed / "compared.jsonl")
    assert summary["compare"] == expected["compare"]
    assert (summary["compare"]["decided"], summary["compare"]["passed"]) == (True, False)  # 1.0 -> 0.25
    assert merged.ret == unsharded.ret == 1
    verdict = [line for line in merged.out.splitlines() if line.startswith("compare ")]
    assert verdict == [line for line in unsharded.out.splitlines() if line.startswith("compare ")]
    assert verdict[0].startswith("compare FAIL  aime25.average_at_n  (0.2500 vs 1.0000 on 10 shared problems")
