"""`--model-path trio://...` through the real PyTRIO SDK against the local PyTRIO service:
complete results, the same generations for a seed whatever the worker count, prompts that
are the chat template's rendering of the lab's messages, and the SDK's real payloads."""

from __future__ import annotations

from typing import Any

import pytest
from transformers import AutoTokenizer

from pytest_agenteval.aime25._conversation import TOOLS
from pytest_agenteval.aime25._protocol import initial_messages
from pytest_agenteval.aime25.suite import text_only_messages
from tests.conftest import TINY_PROBLEMS, read_results
from tests.trio.conftest import BASE, FOREIGN, STEP

SMALL = (
    "--val-n=2",
    "--max-tokens=8",
    "--limit=2",
    "--agenteval-no-cache",
    "--temperature=1.0",
    "--top-p=0.7",
)
RETOOL = (
    "--mode=retool",
    "--max-assistant-tokens=12",
    "--max-trajectory-tokens=1024",
    "--max-assistant-turns=2",
)


def _texts(path: Any) -> dict[tuple[Any, int], tuple[str, int]]:
    problems, _ = read_results(path)
    return {
        (p["problem_id"], g["sample_index"]): (g["text"], g["seed"])
        for p in problems
        for g in p["generations"]
    }


def _rendered(tokenizer_dir: Any, messages: list[dict[str, Any]], tools: Any = None) -> list[int]:
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir), local_files_only=True)
    ids = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=True)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


@pytest.mark.parametrize("mode", [(), RETOOL], ids=["text-only", "retool"])
def test_same_generations_with_and_without_workers(
    run_suite: Any, trio_server: Any, tokenizer_dir: Any, mode: Any
) -> None:
    server = trio_server()
    args = (f"--model-path={STEP}", f"--base-model={BASE}", *SMALL, *mode)
    alone, alone_path = run_suite(*args, out="alone.jsonl")
    alone.assert_outcomes(failed=2)  # scored (a 135M model answers wrong), not errored
    workers, workers_path = run_suite(*args, "-n", "2", out="workers.jsonl")
    workers.assert_outcomes(failed=2)
    first, second = _texts(alone_path), _texts(workers_path)
    assert len(first) == 4 and first == second  # 2 problems x 2 samples, identical
    problems, (summary,) = read_results(workers_path)
    assert all(not p.get("error") for p in problems)
    assert summary["model"]["backend"] == "trio" and summary["model"]["base_model"] == BASE
    assert summary["backend"]["ok"] >= 4 and summary["backend"]["sdk_retries"] == 0

    # the SDK's own payloads, with our prompt ids: the chat template's rendering of the lab's messages
    bodies = [entry["body"] for entry in server.requests]
    assert set(server.sampling_runs[r]["source_checkpoint_uri"] for r in server.sampling_runs) == {STEP}
    assert all(b["request_id"].startswith("req_") and b["return_token_logprobs"] is True for b in bodies)
    prompts = {tuple(b["prompt"]["chunks"][0]["tokens"]) for b in bodies}
    for row in TINY_PROBLEMS[:2]:
        if mode:
            expected = _rendered(tokenizer_dir, initial_messages(row["problem"]), TOOLS)
        else:
            expected = _rendered(tokenizer_dir, text_only_messages(row["problem"]))
        assert tuple(expected) in prompts
    assert all(
        b["sampling_params"]["top_p"] == 0.7 and b["sampling_params"]["temperature"] == 1.0 for b in bodies
    )
    assert len(server.closed_sessions) >= 2 and set(server.closed_sessions.values()) == {"ENDED"}


def test_samples_per_request_is_one_request_with_num_samples(run_suite: Any, trio_server: Any) -> None:
    server = trio_server()
    result, path = run_suite(
        "--model-path=trio://", f"--base-model={BASE}", *SMALL, "--samples-per-request=2"
    )
    result.assert_outcomes(failed=2)
    bodies = [entry["body"] for entry in server.requests]
    assert len(bodies) == 2 and {b["num_samples"] for b in bodies} == {2}  # one request a problem
    assert {r["source_checkpoint_uri"] for r in server.sampling_runs.values()} == {""}  # the base itself
    problems, _ = read_results(path)
    for problem in problems:
        seeds = {g["request_seed"] for g in problem["generations"]}
        assert len(seeds) == 1 and [g["choice_index"] for g in problem["generations"]] == [0, 1]
        assert seeds == {
            b["sampling_params"]["seed"] for b in bodies if b["sampling_params"]["seed"] in seeds
        }


def test_injected_faults_still_give_every_generation(run_suite: Any, trio_server: Any) -> None:
    server = trio_server(fault_rate=0.2, fault_seed=1)
    result, path = run_suite(f"--model-path={STEP}", f"--base-model={BASE}", *SMALL, "--val-n=8", "-n", "2")
    result.assert_outcomes(failed=2)
    problems, (summary,) = read_results(path)
    assert sum(len(p["generations"]) for p in problems) == 16 and all(not p.get("error") for p in problems)
    faults = sum(n for kind, n in server.stats()["outcomes"].items() if kind != "ok")
    assert faults >= 1
    assert summary["backend"]["sdk_retries"] == faults  # every fault retried by the SDK, counted by us


def test_a_stalled_request_is_retried_within_the_timeout(run_suite: Any, trio_server: Any) -> None:
    stalled: list[str] = []

    def stall_once(ctx: Any) -> str | None:
        if not stalled:
            stalled.append(ctx.key)
            return "stall"
        return None

    server = trio_server(fault_plan=stall_once, stall_s=20.0)
    result, path = run_suite(f"--model-path={STEP}", f"--base-model={BASE}", *SMALL, "--request-timeout=2")
    result.assert_outcomes(failed=2)
    problems, (summary,) = read_results(path)
    assert sum(len(p["generations"]) for p in problems) == 4
    assert summary["backend"]["retry_stall"] == 1 and summary["backend"]["retries"] == 1
    outcomes = [e["outcome"] for e in server.requests if e["key"] == stalled[0]]
    assert outcomes[0] == "stall" and outcomes[-1] == "ok"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        ((f"--model-path={STEP}",), "needs --base-model"),
        ((f"--model-path={STEP}", "--base-model=nope"), "HTTP 404 model.not_found"),
        ((f"--model-path={FOREIGN}", f"--base-model={BASE}"), "HTTP 400 checkpoint.base_model_mismatch"),
    ],
    ids=["no-base-model", "unknown-base-model", "foreign-checkpoint"],
)
def test_bad_model_options_are_one_line(run_suite: Any, trio_server: Any, args: Any, line: str) -> None:
    trio_server()
    result, _ = run_suite(*args, *SMALL)
    assert result.ret == 4
    errors = [x for x in result.stderr.lines if x.startswith("ERROR:")]
    assert len(errors) == 1 and line in errors[0], result.stderr.str()
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_a_rejected_key_is_one_line(
    run_suite: Any, trio_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    trio_server()
    monkeypatch.setenv("PYTRIO_API_KEY", "expired-key")
    result, _ = run_suite(f"--model-path={STEP}", f"--base-model={BASE}", *SMALL)
    assert result.ret == 4
    errors = [x for x in result.stderr.lines if x.startswith("ERROR:")]
    assert len(errors) == 1 and "refused the key in PYTRIO_API_KEY" in errors[0], result.stderr.str()
    assert "expired-key" not in result.stderr.str() + result.stdout.str()


def test_an_unreachable_service_is_one_line(run_suite: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTRIO_BASE_URL", "http://127.0.0.1:9")  # discard port: nothing listens
    monkeypatch.setenv("PYTRIO_API_KEY", "k")
    result, _ = run_suite(f"--model-path={STEP}", f"--base-model={BASE}", *SMALL, "--retry-max-seconds=2")
    assert result.ret == 4
    errors = [x for x in result.stderr.lines if x.startswith("ERROR:")]
    assert len(errors) == 1 and "cannot reach PyTRIO at http://127.0.0.1:9" in errors[0], result.stderr.str()
