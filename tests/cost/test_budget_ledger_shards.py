"""One budget across the shards of a cluster run (`--budget-ledger FILE`): 4 shard
processes at once draw on one ledger against a server that bills as a provider, and the
server's own total stays within the one --max-cost; the merge sums what the shards spent.
The start-up refusals: a budget with shards and no ledger, a ledger on storage without
working locks, --batch with a budget, an unpriced model whose name came from the server."""

from __future__ import annotations

import errno
import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.sharding.conftest import _env, aime_folder, lines, merge_run, write_jsonl

PRICES = '[models."mock-model"]\ninput = 1.0\noutput = 2.0\nsource = "test"\ndate = "2026-12-02"\n'
ANSWER = "Let me think about it step by step. " * 8 + "\\boxed{7}"
PROBLEMS = [
    {"id": i, "problem": f"What is {i} + {i}? " + "Think. " * i, "answer": str(2 * i)} for i in range(24)
]


def test_four_shards_at_once_draw_on_one_budget_ledger(tmp_path: Path) -> None:
    """Slower (~4 s on 2 cores): 4 pytest processes at once, as a cluster's shards run."""
    folder = aime_folder(tmp_path / "run")
    write_jsonl(folder / "tiny.jsonl", PROBLEMS)
    (folder / "prices.toml").write_text(PRICES)
    ledger, budget = tmp_path / "shared" / "budget.json", 0.003
    ledger.parent.mkdir()
    with OpenAITestServer(ServerConfig(answer=ANSWER, billing=True)) as server:
        common = [
            "-m", "pytest", "-p", "no:cacheprovider", "--dataset-path=tiny.jsonl", "--mode=text-only",
            f"--endpoint={server.url}", "--model-name=mock-model", "--prices=prices.toml", "--val-n=2",
            "--max-tokens=40", "--agenteval-no-cache", f"--max-cost={budget}", f"--budget-ledger={ledger}",
        ]  # fmt: skip
        shards = [
            subprocess.Popen(
                [sys.executable, *common, f"--agenteval-shard={i}/4", f"--agenteval-out=s{i}.jsonl"],
                cwd=folder,
                env=_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )  # fmt: skip
            for i in range(4)
        ]
        outputs = [shard.communicate(timeout=120)[0] for shard in shards]
        billed = server.billed
    spent = (billed["prompt_tokens"] * 1.0 + billed["completion_tokens"] * 2.0) / 1e6
    assert spent <= budget, outputs
    print(f"4 shards: the server billed ${spent:.6f} of the one --max-cost ${budget}")
    summaries = [lines(folder / f"s{i}.jsonl")[1][0]["budget"] for i in range(4)]
    assert any(s["stopped"] for s in summaries), outputs  # the budget, not the data, ended it
    assert all(s["ledger"]["path"] == str(ledger) for s in summaries)
    assert sum(s["spent_usd"] for s in summaries) == pytest.approx(spent, abs=1e-8)
    merged = merge_run(folder, "s0.jsonl", "s1.jsonl", "s2.jsonl", "s3.jsonl", "--out=merged.jsonl")
    (summary,) = lines(folder / "merged.jsonl")[1]
    assert summary["budget"]["spent_usd"] == pytest.approx(spent, abs=1e-8), merged.out + merged.err
    assert summary["budget"]["shards"] == 4 and summary["budget"]["shared_ledger"] == str(ledger)
    stopped = sorted(p for s in summaries for p in s["stopped_problem_ids"])
    assert sorted(summary["budget"]["stopped_problem_ids"]) == stopped


def _one_line(result, message: str) -> None:
    output = result.stdout.str() + result.stderr.str()
    assert message in output and "Traceback" not in output, output
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_a_budget_with_shards_and_no_ledger_is_refused_at_start_up(run_suite) -> None:
    result, _ = run_suite("--model-path=replay:nothing.jsonl", "--max-cost=5", "--agenteval-shard=0/8")
    _one_line(
        result,
        "--max-cost with --agenteval-shard: each shard would keep its own ledger, so N shards could spend "
        "N x --max-cost; give every shard --budget-ledger FILE on storage they all see (one budget), or "
        "--budget-per-shard (each shard's own)",
    )


def test_budget_per_shard_says_each_shard_has_its_own(run_suite, pytester: pytest.Pytester) -> None:
    with OpenAITestServer(ServerConfig(answer="\\boxed{0}")) as server:
        result, out = run_suite(
            f"--endpoint={server.url}",
            "--max-total-tokens=100000",
            "--agenteval-shard=0/2",
            "--budget-per-shard",
        )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()
    assert "ledger" not in lines(out)[1][0]["budget"]


def test_a_ledger_on_storage_without_working_locks_is_refused(
    run_suite, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fake for the one fault no test machine has: a file system whose flock fails
    (NFS mounted without lock support answers ENOLCK)."""

    def no_locks(handle, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    ledger = pytester.path / "budget.json"
    with OpenAITestServer() as server:
        result, _ = run_suite(
            f"--endpoint={server.url}", "--max-total-tokens=100", f"--budget-ledger={ledger}"
        )
        assert server.requests == []
    _one_line(
        result,
        f"--budget-ledger {ledger}: its storage has no working file locks "
        "(flock failed: No locks available), so shards could spend the same dollar twice; "
        "put it on storage with flock",
    )


def test_a_ledger_without_a_budget_is_refused(run_suite) -> None:
    result, _ = run_suite("--model-path=replay:nothing.jsonl", "--budget-ledger=b.json")
    _one_line(
        result, "--budget-ledger b.json: no budget to draw on; add --max-cost USD or --max-total-tokens N"
    )


def test_batch_with_a_budget_is_the_whole_conflict_in_one_line(run_suite) -> None:
    """Before: the missing price first, the real conflict only after that was fixed."""
    with OpenAITestServer() as server:
        result, _ = run_suite(
            f"--endpoint={server.url}", "--model-name=mock-model", "--batch", "--max-cost=5"
        )
    _one_line(
        result,
        "--batch sends its requests outside the budget ledger, so --max-cost and --max-total-tokens would "
        "not bound them: drop the budget (or --batch)",
    )
    assert "no price" not in result.stdout.str() + result.stderr.str()


def test_the_price_refusal_names_where_the_model_name_came_from(run_suite) -> None:
    with OpenAITestServer() as server:
        result, _ = run_suite(f"--endpoint={server.url}", "--max-cost=5")  # no --model-name
        url = server.url
    _one_line(
        result,
        f"--max-cost $5.000000: no price for the model 'mock-model' (the name {url}/models lists; "
        '--model-name NAME picks another); add [models."mock-model"]',
    )


def test_a_relative_ledger_path_is_resolved_at_start_up(run_suite, pytester: pytest.Pytester) -> None:
    """Shards started from different folders name one file: before, the summary kept the
    relative string, and the merge's shared_ledger became a list."""
    with OpenAITestServer(ServerConfig(answer="\\boxed{0}")) as server:
        result, out = run_suite(
            f"--endpoint={server.url}", "--max-total-tokens=100000", "--budget-ledger=budget.json"
        )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()
    budget = lines(out)[1][0]["budget"]
    assert budget["ledger"]["path"] == str((pytester.path / "budget.json").resolve())
    assert budget["requests"] > 0 and budget["ledger"]["spent_tokens"] == budget["spent_tokens"]
