"""--batch through pytest against the test server's Batch API (issue 24 item 3): the items
read every generation from the cache the batch filled (no live request), the summary is a
live run's, expired and failed requests go out again, a Ctrl-C while polling leaves the
batch for the next run to collect, and multi-turn suites refuse --batch at start-up."""

from __future__ import annotations

import signal
import sys
import time

import pytest

from pytest_agenteval.testing import BatchConfig
from tests.batch.conftest import ANSWERS, DEFAULT_ANSWER, ledger, metrics
from tests.conftest import SUITE_FILE, TINY_PROBLEMS, interruptible, replay_rows, write_jsonl

XDIST = [pytest.param((), id="one-process"), pytest.param(("-n", "2"), id="xdist")]
GENERATIONS = len(TINY_PROBLEMS) * 2  # --val-n=2


@pytest.mark.parametrize("workers", XDIST)
def test_aime_text_only_batch_run_reads_everything_from_the_batch_and_matches_a_live_run(
    pytester: pytest.Pytester, aime_run, agenteval_openai_server_factory, workers
) -> None:
    live_server = agenteval_openai_server_factory(answers=ANSWERS, answer=DEFAULT_ANSWER)
    live, live_summary = aime_run(live_server, *workers, cache="live-cache", out="live.jsonl")
    live.assert_outcomes(passed=2, failed=2)

    server = agenteval_openai_server_factory(
        answers=ANSWERS, answer=DEFAULT_ANSWER, batch=BatchConfig(validating_s=0.05, request_ms=10)
    )
    result, summary = aime_run(server, "--batch", *workers)
    result.assert_outcomes(passed=2, failed=2)
    assert server.stats()["total_requests"] == 0  # not one live request
    batch = server.stats()["batch"]
    assert (batch["batches_created"], batch["files_uploaded"]) == (1, 1)  # one per suite, xdist too
    assert batch["requests_answered"] == GENERATIONS
    # the same results; only what they cost differs: this run paid for them through its batch
    assert metrics(summary) | {"cost": None} == metrics(live_summary) | {"cost": None}
    assert summary["cost"]["batched_generations"] == GENERATIONS
    assert summary["backend"]["batch_requests"] == GENERATIONS
    assert summary["backend"]["batch_answered"] == GENERATIONS
    assert summary["backend"].get("requests", 0) == 0
    assert ledger(pytester.path / "cache") == []  # collected: nothing left in flight


def test_progress_lines_show_the_batch_state_and_counts(aime_run, agenteval_openai_server_factory) -> None:
    server = agenteval_openai_server_factory(batch=BatchConfig(validating_s=0.1, request_ms=40))
    result, _ = aime_run(server, "--batch")
    lines = [line for line in result.outlines if line.startswith("agenteval: batch ")]
    assert lines[0] == "agenteval: batch batch-mock000002 (aime25): 8 requests sent"
    assert "agenteval: batch batch-mock000002 (aime25): validating, 0/0 done, 0 failed" in lines
    assert lines[-1] == "agenteval: batch batch-mock000002 (aime25): completed, 8/8 done, 0 failed"
    moving = [line for line in lines if "in_progress" in line]
    assert len(moving) >= 2  # the counts move while it runs


def test_a_batch_that_expires_is_resubmitted_for_the_requests_it_never_ran(
    aime_run, agenteval_openai_server_factory
) -> None:
    server = agenteval_openai_server_factory(batch=BatchConfig(expire_after=3, expire_batches=1))
    result, summary = aime_run(server, "--batch")
    result.assert_outcomes(passed=1, failed=3)  # the default answer, 70, is right for problem 0 only
    batch = server.stats()["batch"]
    assert batch["statuses"] == {"expired": 1, "completed": 1}
    assert (batch["requests_answered"], batch["requests_not_run"]) == (GENERATIONS, GENERATIONS - 3)
    assert server.stats()["total_requests"] == 0
    backend = summary["backend"]
    assert (backend["batch_batches"], backend["batch_resubmitted"]) == (2, GENERATIONS - 3)
    assert backend["batch_answered"] == GENERATIONS


def test_requests_that_failed_in_a_batch_are_resubmitted_until_answered(
    aime_run, agenteval_openai_server_factory
) -> None:
    server = agenteval_openai_server_factory(batch=BatchConfig(fail_first_k=2))  # 500 twice, then ok
    result, summary = aime_run(server, "--batch")
    result.assert_outcomes(passed=1, failed=3)
    batch = server.stats()["batch"]
    assert (batch["batches_created"], batch["requests_failed"]) == (3, 2 * GENERATIONS)
    assert batch["requests_answered"] == GENERATIONS
    assert server.stats()["total_requests"] == 0
    assert summary["backend"]["batch_resubmitted"] == 2 * GENERATIONS


def test_requests_still_failing_after_every_round_are_sent_live(
    aime_run, agenteval_openai_server_factory
) -> None:
    server = agenteval_openai_server_factory(batch=BatchConfig(fail_first_k=9))
    result, summary = aime_run(server, "--batch")
    result.assert_outcomes(passed=1, failed=3)
    assert server.stats()["batch"]["batches_created"] == 4  # the first and 3 resubmissions
    assert server.stats()["total_requests"] == GENERATIONS  # then live, once each
    assert summary["backend"]["batch_left"] == GENERATIONS
    result.stdout.fnmatch_lines(["agenteval: 8 request(s) still unanswered after 3 resubmissions: sent live"])


def test_a_batch_already_in_the_cache_is_not_sent_again(aime_run, agenteval_openai_server_factory) -> None:
    server = agenteval_openai_server_factory()
    aime_run(server, "--batch")[0].assert_outcomes(passed=1, failed=3)
    again, summary = aime_run(server, "--batch", out="again.jsonl")
    again.assert_outcomes(passed=1, failed=3)
    assert server.stats()["batch"]["batches_created"] == 1
    assert "batch_requests" not in summary["backend"]


def test_ctrl_c_while_polling_keeps_the_batch_and_a_rerun_collects_it(
    pytester: pytest.Pytester, aime_run, agenteval_openai_server_factory
) -> None:
    config = BatchConfig(validating_s=0.2, request_ms=1000)  # 8 requests: 8 s in progress
    server = agenteval_openai_server_factory(batch=config)
    data = write_jsonl(pytester.path / "tiny_aime.jsonl", TINY_PROBLEMS)
    pytester.makepyfile(test_tiny=SUITE_FILE)
    cache = pytester.path / "cache"
    command = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_tiny.py",
        f"--endpoint={server.url}", "--model-name=mock-model", "--model-revision=test",
        f"--dataset-path={data}", "--mode=text-only", "--val-n=2", f"--agenteval-cache-dir={cache}",
        "--agenteval-out=first.jsonl", "--batch", "--batch-poll-interval=0.05",
    ]  # fmt: skip
    child = interruptible(command, pytester.path)
    deadline = time.monotonic() + 60
    while not ledger(cache) and time.monotonic() < deadline:
        time.sleep(0.05)
    kept = ledger(cache)
    assert [entry["suite"] for entry in kept] == ["aime25"]
    child.send_signal(signal.SIGINT)
    assert child.wait(timeout=60) == 2  # interrupted
    assert ledger(cache) == kept  # still listed: nothing collected it
    assert server.stats()["batch"]["requests_answered"] < GENERATIONS  # stopped while it ran

    config.request_ms = 0  # the rest of the batch runs at once
    result, summary = aime_run(server, "--batch")
    result.assert_outcomes(passed=1, failed=3)
    stats = server.stats()
    assert stats["batch"]["batches_created"] == 1  # collected, not paid again
    assert stats["batch"]["requests_answered"] == GENERATIONS  # each answered once
    assert stats["total_requests"] == 0
    assert summary["backend"]["batch_collected"] == 1
    assert ledger(cache) == []
    result.stdout.fnmatch_lines([f"agenteval: collecting 1 batch(es) an earlier run sent: {kept[0]['id']}"])


@pytest.mark.parametrize("workers", XDIST)
def test_aime_retool_refuses_batch_at_start_up(aime_run, agenteval_openai_server_factory, workers) -> None:
    server = agenteval_openai_server_factory()
    result, _ = aime_run(server, "--batch", "--mode=retool", *workers)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --batch sends single-turn requests only, and aime25 in retool mode is multi-turn: "
            "pass --mode text-only for AIME, or drop --batch"
        ]
    )
    assert server.stats()["batch"]["files_uploaded"] == 0


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ("--agenteval-no-cache",),
            "ERROR: --batch brings the replies back through the generation cache: "
            "drop --agenteval-no-cache (or --batch)",
        ),
        (
            ("--max-total-tokens=100000",),
            "ERROR: --batch sends its requests outside the budget ledger, so --max-cost and "
            "--max-total-tokens would not bound them: drop the budget (or --batch)",
        ),
        (("--batch-poll-interval=0",), "ERROR: --batch-poll-interval must be > 0 seconds, got 0"),
    ],
)
def test_batch_options_are_checked_at_start_up(aime_run, agenteval_openai_server_factory, args, line) -> None:
    server = agenteval_openai_server_factory()
    result, _ = aime_run(server, "--batch", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([line])
    assert (server.stats()["batch"]["files_uploaded"], server.stats()["total_requests"]) == (0, 0)


def test_a_model_without_an_endpoint_refuses_batch(pytester: pytest.Pytester, tiny_aime) -> None:
    pytester.makepyfile(test_tiny=SUITE_FILE)
    replay = write_jsonl(pytester.path / "replay.jsonl", replay_rows({0: ["\\boxed{70}"]}))
    result = pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", f"--model-path=replay:{replay}", f"--dataset-path={tiny_aime}", "--batch"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --batch sends the requests to an OpenAI-compatible Batch API: it needs --endpoint URL; "
            "in-process and launched (--model-path, --serve) models have none: drop --batch"
        ]
    )


def test_samples_per_request_go_in_a_batch_as_one_request_with_n(
    aime_run, agenteval_openai_server_factory
) -> None:
    live_server = agenteval_openai_server_factory(answers=ANSWERS, answer=DEFAULT_ANSWER)
    _, live_summary = aime_run(live_server, "--samples-per-request=2", cache="live-cache", out="live.jsonl")
    server = agenteval_openai_server_factory(answers=ANSWERS, answer=DEFAULT_ANSWER)
    result, summary = aime_run(server, "--batch", "--samples-per-request=2")
    result.assert_outcomes(passed=2, failed=2)
    assert server.stats()["total_requests"] == 0
    assert server.stats()["batch"]["requests_answered"] == len(TINY_PROBLEMS)  # n=2 each
    assert live_server.stats()["choices_served"] == GENERATIONS
    # the same results; only what they cost differs: this run paid for them through its batch
    assert metrics(summary) | {"cost": None} == metrics(live_summary) | {"cost": None}
    # one request with n=2 a problem: the sample whose rollout sent it records the batch
    assert summary["cost"]["batched_generations"] == len(TINY_PROBLEMS)
    # mock-model has no price: no dollars at all, from the cache or not (test_batch_cost.py prices them)
    assert (summary["cost"]["usd"], summary["cost"]["usd_from_cache"]) == (None, None)
