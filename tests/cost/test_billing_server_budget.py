"""The budget against a server that bills as a provider does (`ServerConfig(billing=True)`:
its own tokenizer, every token it generated counted whether or not the client got it):
whatever the run does, the server's own total never exceeds the budget. Each run is
stopped by its budget (else it would prove nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agenteval.testing import FaultContext, OpenAITestServer, ServerConfig
from tests.conftest import read_results, write_jsonl

PRICES = '[models."mock-model"]\ninput = 1.0\noutput = 2.0\nsource = "test"\ndate = "2026-12-02"\n'
ANSWER = "Let me think about it step by step. " * 8 + "\\boxed{7}"  # past --max-tokens: 40 billed
PROBLEMS = [
    {"id": i, "problem": f"What is {i} + {i}? " + "Think. " * i, "answer": str(2 * i)} for i in range(12)
]
# Chinese, Greek, emoji: 3, 2 and 4 bytes a character, 12x what 4 characters a token says
NON_ASCII = [
    {"id": i, "problem": f"计算 {i} 加 {i} 的值。" * 20 + "αβγ😀" * 10, "answer": str(2 * i)}
    for i in range(12)
]


def _billed_usd(server: OpenAITestServer) -> float:
    billed = server.billed
    return (billed["prompt_tokens"] * 1.0 + billed["completion_tokens"] * 2.0) / 1e6


@pytest.fixture
def prices(pytester: pytest.Pytester) -> Path:
    path = pytester.path / "prices.toml"
    path.write_text(PRICES)
    return path


def _run(run_suite, server: OpenAITestServer, data: Path, *args: str) -> dict:
    result, out = run_suite(
        f"--endpoint={server.url}", "--max-tokens=40", "--agenteval-no-cache", *args, data=data
    )
    _, (summary,) = read_results(out)
    return summary


def test_samples_per_request_on_a_server_that_ignores_n(run_suite, pytester, prices: Path) -> None:
    data = write_jsonl(pytester.path / "p.jsonl", PROBLEMS)
    budget = 0.002
    with OpenAITestServer(ServerConfig(answer=ANSWER, support_n=False, billing=True)) as server:
        summary = _run(
            run_suite, server, data, "--model-name=mock-model", f"--prices={prices}",
            "--val-n=4", "--samples-per-request=4", f"--max-cost={budget}",
        )  # fmt: skip
        assert any(r["n"] == 1 for r in server.requests)  # the fallback's single requests
        spent = _billed_usd(server)
    assert spent <= budget and summary["budget"]["stopped"] is True
    assert summary["budget"]["spent_usd"] == pytest.approx(spent, abs=1e-9)  # the ledger saw it all


def _one_in_five_cut(context: FaultContext) -> str | None:
    """20% of the requests: the first reply cut short after the server generated it."""
    return "truncated" if context.attempt == 0 and int(context.key[:8], 16) % 5 == 0 else None


def test_replies_cut_short_after_generation_then_retried(run_suite, pytester, prices: Path) -> None:
    data = write_jsonl(pytester.path / "p.jsonl", PROBLEMS)
    budget = 0.003
    config = ServerConfig(answer=ANSWER, billing=True, fault_plan=_one_in_five_cut)
    with OpenAITestServer(config) as server:
        summary = _run(
            run_suite, server, data, "--model-name=mock-model", f"--prices={prices}", "--val-n=2",
            f"--max-cost={budget}",
        )  # fmt: skip
        cut = sum(r["outcome"] == "truncated" for r in server.requests)
        spent = _billed_usd(server)
    assert cut > 0 and spent <= budget and summary["budget"]["stopped"] is True
    assert summary["budget"]["spent_usd"] >= spent  # the cut ones at their worst case


def _one_in_five_stalls(context: FaultContext) -> str | None:
    """20% of the requests: the first attempt stalls until the client times out and hangs up."""
    return "stall" if context.attempt == 0 and int(context.key[:8], 16) % 5 == 0 else None


def test_requests_the_client_timed_out_on_then_retried(run_suite, pytester, prices: Path) -> None:
    """The server generates while the client waits, and bills it when the client hangs up
    (before: a handler cancelled by the hang-up billed nothing, so no timeout was covered)."""
    data = write_jsonl(pytester.path / "p.jsonl", PROBLEMS)
    budget = 0.003
    config = ServerConfig(answer=ANSWER, billing=True, fault_plan=_one_in_five_stalls, stall_s=30.0)
    with OpenAITestServer(config) as server:
        summary = _run(
            run_suite, server, data, "--model-name=mock-model", f"--prices={prices}", "--val-n=2",
            f"--max-cost={budget}", "--request-timeout=0.4",
        )  # fmt: skip
        stalled = sum(r["outcome"] == "stall" for r in server.requests)
        generations = server.billed["generations"]
        spent = _billed_usd(server)
        sent = len(server.requests)
    assert stalled > 0 and generations == sent  # each request billed, the timed-out ones too
    assert spent <= budget and summary["budget"]["stopped"] is True
    assert summary["budget"]["spent_usd"] >= spent  # the timed-out ones at their worst case
    assert summary["backend"]["retry_timeout"] == stalled


def test_non_ascii_prompts_under_a_token_budget(run_suite, pytester) -> None:
    data = write_jsonl(pytester.path / "p.jsonl", NON_ASCII)
    limit = 12_000
    with OpenAITestServer(ServerConfig(answer=ANSWER, billing=True)) as server:
        summary = _run(run_suite, server, data, "--val-n=2", f"--max-total-tokens={limit}")
        billed = server.billed
    assert billed["prompt_tokens"] + billed["completion_tokens"] <= limit
    assert summary["budget"]["stopped"] is True
    assert summary["budget"]["spent_tokens"] == billed["prompt_tokens"] + billed["completion_tokens"]
    assert set(summary["budget"]["prompt_reservation"]) == {"UTF-8 bytes + framing"}


def test_a_server_with_tokenize_is_reserved_by_its_own_count(run_suite, pytester) -> None:
    data = write_jsonl(pytester.path / "p.jsonl", NON_ASCII)
    limit = 12_000
    with OpenAITestServer(ServerConfig(answer=ANSWER, billing=True, tokenize="vllm")) as server:
        summary = _run(run_suite, server, data, "--val-n=2", f"--max-total-tokens={limit}")
        billed = server.billed
    assert billed["prompt_tokens"] + billed["completion_tokens"] <= limit
    assert summary["budget"]["stopped"] is True
    assert set(summary["budget"]["prompt_reservation"]) == {"the server's /tokenize"}
