"""The suite against OpenAI-compatible servers over real sockets: our test server (exact
requests and answers) and a real `python -m llama_cpp.server` with the embedded model."""

from __future__ import annotations

from pytest_agenteval.api.records import sample_seed
from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import read_results

ANSWERS = {"30 + 40": "easy: \\boxed{70}", "12 * 49": "\\boxed{588}", "power 4": "\\boxed{15}"}


def test_endpoint_run_sends_one_request_per_sample_with_its_seed(run_suite) -> None:
    with OpenAITestServer(ServerConfig(answers=ANSWERS, answer="no idea")) as server:
        result, out = run_suite(f"--endpoint={server.url}", "--val-n=3", "-n", "2")
        requests = server.requests
    result.assert_outcomes(passed=2, failed=2)
    problems, (summary,) = read_results(out)
    server_root = summary["model"]["reported"][0].get("root", "")
    assert server_root.startswith("pytest-agenteval-test-server/")
    assert sorted(r["seed"] for r in requests) == sorted(
        sample_seed(42, pid, j) for pid in range(4) for j in range(3)
    )
    assert [g["seed"] for g in problems[1]["generations"]] == [sample_seed(42, 1, j) for j in range(3)]
    assert [p["num_correct"] for p in problems] == [3, 3, 0, 0]
    assert summary["model"] == {
        "backend": "openai",
        "label": "mock-model",
        "name": "mock-model",
        "display": "mock-model (openai)",  # how the terminal names it
        "endpoints": [server.url],
        # its /v1/models entry: the test server names its own replies (this instance)
        "reported": [{"id": "mock-model", "owned_by": "pytest-agenteval", "root": server_root}],
        "weights_identified": True,
        "api_key_env": "OPENAI_API_KEY",
        "token_counter": "the server's tokenizer where it has /tokenize or /extras/tokenize, else an "
        "estimate (each generation records which: token_counting)",
    }
    assert (summary["average_at_n"], summary["requests"]["attempts"]) == (0.5, 12)


def test_api_key_comes_from_the_environment_and_is_never_recorded(run_suite, monkeypatch) -> None:
    monkeypatch.setenv("MY_EVAL_KEY", "sk-secret-123")
    with OpenAITestServer(ServerConfig(api_key="sk-secret-123")) as server:
        result, out = run_suite(
            f"--endpoint={server.url}", "--val-n=1", "--limit=1", "--api-key-env=MY_EVAL_KEY"
        )
    result.assert_outcomes(passed=1)
    assert "sk-secret-123" not in out.read_text()


def test_a_wrong_key_is_a_start_up_error(run_suite, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "wrong")
    with OpenAITestServer(ServerConfig(api_key="right")) as server:
        result, _ = run_suite(f"--endpoint={server.url}")
    assert result.ret == 4
    assert f"--endpoint {server.url} refused the API key (HTTP 401)" in result.stderr.str()


def test_real_llama_cpp_server_gives_the_same_file_shape(run_suite, llama_server: str) -> None:
    result, out = run_suite(
        f"--endpoint={llama_server}", "--val-n=2", "--limit=3", "--max-tokens=24", "-n", "2"
    )
    assert result.ret == 1  # SmolLM2 solves none: failures, not errors
    result.assert_outcomes(failed=3)
    problems, (summary,) = read_results(out)
    assert [p["problem_id"] for p in problems] == [0, 1, 2]
    assert all(len(p["generations"]) == 2 and all(g["text"] for g in p["generations"]) for p in problems)
    assert {
        "text",
        "correct",
        "formatted",
        "predicted_answer",
        "boxed_answer",
        "code_calls",
        "turns",
        "seed",
    } <= problems[0]["generations"][0].keys()
    assert (summary["model"]["name"], summary["generations"], summary["complete"]) == ("smollm2", 6, True)
    assert 0 < summary["tokens"]["completion"] <= 6 * 24


def test_samples_per_request_uses_n_with_the_group_seed(run_suite) -> None:
    with OpenAITestServer(ServerConfig(answer="choice {index} of {n}: \\boxed{70}")) as server:
        result, out = run_suite(
            f"--endpoint={server.url}", "--val-n=4", "--samples-per-request=4", "--limit=2"
        )
        requests = server.requests
    result.assert_outcomes(passed=1, failed=1)
    assert [(r["n"], r["seed"]) for r in requests] == [(4, sample_seed(42, 0, 0)), (4, sample_seed(42, 1, 0))]
    problems, (summary,) = read_results(out)
    generations = problems[0]["generations"]
    assert [g["text"].split(":")[0] for g in generations] == [f"choice {i} of 4" for i in range(4)]
    assert [(g["request_seed"], g["choice_index"]) for g in generations] == [
        (sample_seed(42, 0, 0), i) for i in range(4)
    ]
    assert summary["requests"]["attempts"] == 2 and summary["config"]["samples_per_request"] == 4


def test_a_server_without_n_gets_the_missing_samples_one_by_one(run_suite) -> None:
    with OpenAITestServer(ServerConfig(support_n=False)) as server:
        result, out = run_suite(
            f"--endpoint={server.url}", "--val-n=3", "--samples-per-request=3", "--limit=1"
        )
        seeds = [r["seed"] for r in server.requests]
    first = sample_seed(42, 0, 0)
    assert seeds == [first, first + 1, first + 2]
    problems, _ = read_results(out)
    assert len(problems[0]["generations"]) == 3 and problems[0]["complete"] is True


def test_several_endpoints_each_get_the_full_concurrency(run_suite, pytester) -> None:
    from tests.conftest import write_jsonl

    data = write_jsonl(
        pytester.path / "many.jsonl", [{"id": i, "problem": f"q{i}", "answer": "1"} for i in range(16)]
    )
    config = ServerConfig(latency_ms=150)  # long enough that 4 are in flight on each at once
    with OpenAITestServer(config) as one, OpenAITestServer(config) as two:
        run_suite(f"--endpoint={one.url}", f"--endpoint={two.url}", "--val-n=2", "--concurrency=4", data=data)
        peaks = one.stats()["max_in_flight"], two.stats()["max_in_flight"]
    assert peaks == (4, 4)


def test_collect_only_with_a_gate_is_not_an_evaluation(run_suite) -> None:
    result, out = run_suite("--co", "--agenteval-gate", "aime25.average_at_n >= 0.5")
    assert result.ret == 0 and not out.exists()
