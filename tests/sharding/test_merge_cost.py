"""The merge's cost block comes from what the shards recorded (each generation's cost and
the prices the shards billed by), not from re-reading their --prices file: the merge job
of a cluster runs in another folder, often after the file has moved or changed."""

from __future__ import annotations

import shutil
from pathlib import Path

from pytest_agenteval.testing import OpenAITestServer, ServerConfig

from .conftest import aime_folder, lines, merge_run, run_pytest

PRICES = '[models."mock-model"]\ninput = 1.0\noutput = 2.0\nsource = "test"\ndate = "2026-12-02"\n'


def test_a_merge_elsewhere_bills_by_the_prices_the_shards_recorded(tmp_path: Path) -> None:
    folder = aime_folder(tmp_path / "run")
    (folder / "prices.toml").write_text(PRICES)
    with OpenAITestServer(ServerConfig(answer="So \\boxed{4}.")) as server:
        common = (
            "--dataset-path=tiny.jsonl",
            "--mode=text-only",
            f"--endpoint={server.url}",
            "--model-name=mock-model",
            "--model-revision=r1",
            "--prices=prices.toml",
            "--val-n=2",
        )
        for index in range(2):
            run_pytest(
                folder,
                *common,
                f"--agenteval-shard={index}/2",
                f"--agenteval-out=s{index}.jsonl",
                "--agenteval-cache-dir=shard-cache",
            )
        run_pytest(folder, *common, "--agenteval-out=whole.jsonl", "--agenteval-cache-dir=whole-cache")
    merger = tmp_path / "merge-job"
    merger.mkdir()
    for index in range(2):
        shutil.copy(folder / f"s{index}.jsonl", merger)
    (folder / "prices.toml").write_text(PRICES.replace("input = 1.0", "input = 9.0"))  # changed since
    done = merge_run(merger, "s0.jsonl", "s1.jsonl", "-o", "merged.jsonl")
    assert (done.ret, done.err) == (1, "")  # problems unsolved: 1, as the unsharded run
    (merged,) = lines(merger / "merged.jsonl")[1]
    (whole,) = lines(folder / "whole.jsonl")[1]
    assert merged["cost"] == whole["cost"]
    assert merged["cost"]["prices"] == {
        "mock-model": dict(input=1.0, cached_input=None, output=2.0, source="test", date="2026-12-02")
    }
