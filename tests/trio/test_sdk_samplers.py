"""`--model-path trio://...` and `tinker://...` through the real PyTRIO and Tinker SDKs
against local services: complete results, the same generations for a seed whatever the
worker count, prompts that are the chat template's rendering of the lab's messages, the
SDKs' real payloads, faults survived, and start-up refusals as one line."""

from __future__ import annotations

import signal
import sys
import time
from functools import cache
from typing import Any

import pytest

from pytest_agenteval.tasks.aime25._conversation import TOOLS
from pytest_agenteval.tasks.aime25._protocol import initial_messages
from pytest_agenteval.tasks.aime25.suite import text_only_messages
from tests.conftest import TINY_PROBLEMS, interruptible, read_results

# Both SDKs need transformers (command 1 brings it with them). Imported at the top, not in a
# test: numpy, which it loads, must be in sys.modules before pytester's in-process runs,
# which drop the modules imported during them (numpy cannot be loaded twice in a process).
AutoTokenizer = pytest.importorskip(
    "transformers", reason="the SDK extras are not installed: pip install -e '.[trio,tinker]'"
).AutoTokenizer

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


def _generations(path: Any) -> dict[tuple[Any, int], tuple[str, int]]:
    """(text, seed) of each generation."""
    problems, _ = read_results(path)
    return {
        (p["problem_id"], g["sample_index"]): (g["text"], g["seed"])
        for p in problems
        for g in p["generations"]
    }


@cache
def _tokenizer(tokenizer_dir: str) -> Any:
    """Loaded once per folder (the session's): the same tokenizer every test renders with."""
    return AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)


def _rendered(tokenizer_dir: Any, messages: list[dict[str, Any]], tools: Any = None) -> tuple[int, ...]:
    """transformers' own apply_chat_template: the oracle for our client-side rendering."""
    tokenizer = _tokenizer(str(tokenizer_dir))
    ids = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=True)
    return tuple(ids["input_ids"] if hasattr(ids, "keys") else ids)


def _one_error_line(result: Any) -> str:
    assert result.ret == 4, result.stdout.str()
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1, result.stderr.str()
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    return errors[0]


@pytest.mark.parametrize("mode", [(), RETOOL], ids=["text-only", "retool"])
def test_same_generations_with_and_without_workers(
    run_suite: Any,
    service: Any,
    generator: Any,
    protocol: Any,
    base_model: str,
    tokenizer_dir: Any,
    mode: Any,
) -> None:
    server = service()
    args = (f"--model-path={protocol.step}", f"--base-model={base_model}", *SMALL, *mode)
    alone, alone_path = run_suite(*args, out="alone.jsonl")
    alone.assert_outcomes(failed=2)  # scored (a 135M model answers wrong), not errored
    generated = generator.generated
    workers, workers_path = run_suite(*args, "-n", "2", out="workers.jsonl")
    workers.assert_outcomes(failed=2)
    (alone_summary,) = read_results(alone_path)[1]
    # our --concurrency (32) never above the SDK's cap; -n 2 below: 16 a worker, summed
    assert alone_summary["backend"]["sdk_max_in_flight"] == protocol.cap
    assert alone_summary["backend"]["concurrency_slots"] == min(32, protocol.cap)
    # Whole generations, retool's later turns included: the services answer a request they
    # have answered before with the same sample (conftest `RepeatableSampler`), so the two
    # runs agree exactly when -n 2 sent the very requests (ids, parameters, seeds) -n 0 did,
    # however the two workers' requests interleave: the model generated nothing new for it.
    first = _generations(alone_path)
    assert len(first) == 4 and first == _generations(workers_path)  # 2 x 2
    assert generator.generated == generated
    problems, (summary,) = read_results(workers_path)
    assert all(not p.get("error") for p in problems)
    assert summary["model"]["backend"] == protocol.scheme and summary["model"]["base_model"] == base_model
    assert summary["backend"]["ok"] >= 4 and summary["backend"]["sdk_retries"] == 0
    if mode:  # retool continued from the sampled ids
        assert summary["continuation"] == {"tokens": 4}
    assert (
        summary["backend"]["concurrency_slots"] == 32
        and summary["backend"]["sdk_max_in_flight"] == 2 * protocol.cap
    )

    # one sampler per process (1 alone, 2 workers; the controller's start-up check is reused
    # alone and closed with -n 2), each session ended
    assert server.checkpoints_loaded() == [protocol.step] * 4
    assert len(server.ended_sessions) == 4 and set(server.ended_sessions.values()) == {protocol.ended}
    # the SDK's own payloads, carrying our prompt ids: the template's rendering of the lab's messages
    bodies = [entry["body"] for entry in server.requests]
    if protocol.scheme == "trio":
        assert all(b["request_id"].startswith("req_") and b["return_token_logprobs"] is True for b in bodies)
    else:
        assert all(b["type"] == "sample" and b["sampling_session_id"].startswith("samp_") for b in bodies)
    prompts = {tuple(b["prompt"]["chunks"][0]["tokens"]) for b in bodies}
    for row in TINY_PROBLEMS[:2]:
        if mode:
            assert _rendered(tokenizer_dir, initial_messages(row["problem"]), TOOLS) in prompts
        else:
            assert _rendered(tokenizer_dir, text_only_messages(row["problem"])) in prompts
    assert {(b["sampling_params"]["temperature"], b["sampling_params"]["top_p"]) for b in bodies} == {
        (1.0, 0.7)
    }


def test_samples_per_request_is_one_request_with_num_samples(
    run_suite: Any,
    service: Any,
    protocol: Any,
    base_model: str,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = service()
    monkeypatch.setenv("HOME", str(tmp_path))  # the SDKs' config folders would go here
    base_only = f"--model-path={protocol.scheme}://"
    result, path = run_suite(base_only, f"--base-model={base_model}", *SMALL, "--samples-per-request=2")
    result.assert_outcomes(failed=2)
    bodies = [entry["body"] for entry in server.requests]
    assert len(bodies) == 2 and {b["num_samples"] for b in bodies} == {2}  # one request a problem
    assert server.checkpoints_loaded() == [""]  # the base model itself
    assert not (tmp_path / ".pytrio").exists() and not (tmp_path / ".tinker").exists()
    problems, _ = read_results(path)
    sent = {b["sampling_params"]["seed"] for b in bodies}
    for problem in problems:
        generations = problem["generations"]
        assert [g["choice_index"] for g in generations] == [0, 1]
        assert len({g["request_seed"] for g in generations}) == 1 and generations[0]["request_seed"] in sent


def test_injected_faults_still_give_every_generation(
    run_suite: Any, service: Any, protocol: Any, base_model: str
) -> None:
    server = service(fault_rate=0.2, fault_seed=1)
    # in this process, after earlier in-process runs sent through the SDKs too: the sampler
    # counts the sends from its session's start (sdk.py), and httpx, imported again by this
    # run, is counted again; -n 0: the controller's key-by-key sum of the workers' counters
    # is asserted with -n 2 by test_same_generations_with_and_without_workers
    args = (f"--model-path={protocol.step}", f"--base-model={base_model}", *SMALL, "--val-n=8")
    result, path = run_suite(*args)
    result.assert_outcomes(failed=2)
    problems, (summary,) = read_results(path)
    assert sum(len(p["generations"]) for p in problems) == 16 and all(not p.get("error") for p in problems)
    faults = sum(n for kind, n in server.stats()["outcomes"].items() if kind != "ok")
    assert faults >= 2
    assert summary["backend"]["sdk_retries"] == faults  # each fault retried by the SDK, counted by us
    assert summary["backend"]["requests"] == 16 and summary["backend"].get("retries", 0) == 0


def test_a_stalled_request_is_retried_within_the_timeout(
    run_suite: Any, service: Any, protocol: Any, base_model: str
) -> None:
    stalled: list[str] = []

    def stall_once(ctx: Any) -> str | None:
        if not stalled:
            stalled.append(ctx.key)
            return "stall"
        return None

    server = service(fault_plan=stall_once, stall_s=30.0)
    # 3 s: the retry's 8 tokens come well within it under load; the stall (30 s) far outlasts it
    args = (f"--model-path={protocol.step}", f"--base-model={base_model}", *SMALL, "--request-timeout=3")
    result, path = run_suite(*args)
    result.assert_outcomes(failed=2)
    problems, (summary,) = read_results(path)
    assert sum(len(p["generations"]) for p in problems) == 4
    assert summary["backend"]["retry_stall"] == 1 and summary["backend"]["retries"] == 1
    outcomes = [e["outcome"] for e in server.requests if e["key"] == stalled[0]]
    assert outcomes[0] == "stall" and outcomes[-1] == "ok"


@pytest.mark.parametrize("case", ["no-base-model", "unknown-base-model", "foreign-checkpoint"])
def test_bad_model_options_are_one_line(
    run_suite: Any, service: Any, protocol: Any, base_model: str, case: str
) -> None:
    service()
    args, expected = {
        "no-base-model": ((f"--model-path={protocol.step}",), ("needs --base-model",)),
        "unknown-base-model": (
            (f"--model-path={protocol.scheme}://", "--base-model=nope"),
            ("HTTP 404", "not available"),
        ),
        "foreign-checkpoint": (
            (f"--model-path={protocol.foreign}", f"--base-model={base_model}"),
            ("HTTP 400", "was trained from 'other-base'"),
        ),
    }[case]
    line = _one_error_line(run_suite(*args, *SMALL)[0])
    assert all(part in line for part in expected), line


def test_a_rejected_key_is_one_line(
    run_suite: Any, service: Any, protocol: Any, base_model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    service()
    monkeypatch.setenv(protocol.key_env, protocol.rejected_key)
    result, _ = run_suite(f"--model-path={protocol.step}", f"--base-model={base_model}", *SMALL)
    line = _one_error_line(result)
    assert f"refused the key in {protocol.key_env}" in line, line
    assert protocol.rejected_key not in result.stderr.str() + result.stdout.str()  # never echoed


def test_a_missing_key_is_one_line(run_suite: Any, protocol: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(protocol.key_env, raising=False)
    monkeypatch.delenv("TINKER_CREDENTIAL_CMD", raising=False)
    result, _ = run_suite(f"--model-path={protocol.step}", "--base-model=b", *SMALL)
    assert f"{protocol.key_env} is not set" in _one_error_line(result)


def test_an_unreachable_service_is_one_line(
    run_suite: Any, protocol: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(protocol.url_env, "http://127.0.0.1:9")  # the discard port: nothing listens
    monkeypatch.setenv(protocol.key_env, protocol.key)
    result, _ = run_suite(f"--model-path={protocol.step}", "--base-model=b", *SMALL, "--retry-max-seconds=1")
    line = _one_error_line(result)
    assert f"cannot reach {protocol.vendor} at http://127.0.0.1:9" in line, line


def test_ctrl_c_ends_the_session_as_cancelled(
    aime_suite: pytest.Pytester, tiny_aime: Any, service: Any, protocol: Any, base_model: str
) -> None:
    server = service(fault_plan=lambda ctx: "stall", stall_s=120.0)  # every request hangs
    command = [
        sys.executable,
        "-m",
        "pytest",
        f"--dataset-path={tiny_aime}",
        f"--agenteval-out={aime_suite.path / 'results.jsonl'}",
        "--mode=text-only",
        f"--model-path={protocol.step}",
        f"--base-model={base_model}",
        *SMALL,
    ]
    process = interruptible(command, aime_suite.path)
    deadline = time.monotonic() + 60
    while not server.requests_started() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server.requests_started(), "no sample request arrived"
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=60) == pytest.ExitCode.INTERRUPTED
    assert list(server.ended_sessions.values()) == [protocol.cancelled]
