"""The generation cache: a rerun sends nothing that finished, a changed parameter misses,
retool trajectories resume turn by turn, and a torn last line is ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agenteval.models import SamplingParams
from pytest_agenteval.models.cache import GenerationCache
from pytest_agenteval.testing import OpenAITestServer, Reply, ScriptedToolModel, ServerConfig
from tests.conftest import read_results

PARAMS = SamplingParams(1.0, 0.7, -1, 64, 7)


def test_store_and_reload_across_processes(tmp_path: Path) -> None:
    first = GenerationCache(tmp_path)
    key = first.completion_key({"name": "m"}, [{"role": "user", "content": "hi"}], PARAMS, None)
    first.put(key, {"text": "hello"})
    first.close()
    again = GenerationCache(tmp_path)
    assert again.get(key) == {"text": "hello"} and len(again) == 1


def test_every_input_is_part_of_the_key() -> None:
    base = ({"name": "m"}, [{"role": "user", "content": "hi"}], PARAMS, None)
    keys = {
        GenerationCache.completion_key(*base),
        GenerationCache.completion_key({"name": "other"}, *base[1:]),
        GenerationCache.completion_key(base[0], [{"role": "user", "content": "hi!"}], PARAMS, None),
        GenerationCache.completion_key(*base[:2], SamplingParams(0.9, 0.7, -1, 64, 7), None),
        GenerationCache.completion_key(*base[:2], SamplingParams(1.0, 0.7, -1, 64, 8), None),
        GenerationCache.completion_key(*base[:3], [{"type": "function"}]),
    }
    assert len(keys) == 6


def test_a_torn_last_line_is_ignored(tmp_path: Path) -> None:
    cache = GenerationCache(tmp_path)
    cache.put("a" * 64, {"text": "kept"})
    cache.close()
    segment = next(tmp_path.glob("*.jsonl"))
    with segment.open("ab") as handle:
        handle.write(b"b" * 64 + b'\t{"text": "cut off')  # a process killed mid-write
    reloaded = GenerationCache(tmp_path)
    assert (reloaded.get("a" * 64), reloaded.get("b" * 64), len(reloaded)) == ({"text": "kept"}, None, 1)


def test_rerun_sends_nothing_and_a_changed_parameter_misses(run_suite, pytester: pytest.Pytester) -> None:
    cache = f"--agenteval-cache-dir={pytester.path / 'cache'}"
    with OpenAITestServer(ServerConfig(answer="\\boxed{70} {seed}")) as server:
        run_suite(f"--endpoint={server.url}", "--val-n=2", cache, "-n", "2")
        first = len(server.requests)
        _, out = run_suite(f"--endpoint={server.url}", "--val-n=2", cache, out="again.jsonl")
        second = len(server.requests) - first
        run_suite(f"--endpoint={server.url}", "--val-n=2", cache, "--temperature=0.5", out="hot.jsonl")
        third = len(server.requests) - first - second
    assert (first, second, third) == (8, 0, 8)
    _, (summary,) = read_results(out)
    assert summary["requests"] == {"generations": 8, "attempts": 0, "retries": 0, "cached_generations": 8}


def test_retool_trajectories_resume_from_cached_turns(run_suite, pytester: pytest.Pytester) -> None:
    turns = [
        Reply(
            tool_calls=[
                {"name": "code_interpreter", "arguments": {"code": "import random; print(random.random())"}}
            ]
        ),
        lambda observation, body: f"It printed {observation.strip()}. \\boxed{{70}}",
    ]
    cache = f"--agenteval-cache-dir={pytester.path / 'cache'}"
    args = ("--mode=retool", "--limit=1", "--val-n=2", cache)
    with OpenAITestServer(ServerConfig(script=ScriptedToolModel(turns))) as server:
        _, first = run_suite(f"--endpoint={server.url}", *args, out="first.jsonl")
        sent = len(server.requests)
        _, second = run_suite(f"--endpoint={server.url}", *args, out="second.jsonl")
        resent = len(server.requests) - sent
    assert (sent, resent) == (4, 0)
    texts = [[g["text"] for g in read_results(path)[0][0]["generations"]] for path in (first, second)]
    assert texts[0] == texts[1]  # the random observation came back from the cache too


def test_what_is_sent_beside_the_messages_is_part_of_the_key(run_suite, pytester: pytest.Pytester) -> None:
    cache = f"--agenteval-cache-dir={pytester.path / 'cache'}"
    with OpenAITestServer(ServerConfig()) as server:
        run_suite(f"--endpoint={server.url}", "--val-n=1", "--limit=2", cache, "--thinking=off")
        run_suite(f"--endpoint={server.url}", "--val-n=1", "--limit=2", cache, "--thinking=on", out="b.jsonl")
        assert len(server.requests) == 4  # thinking on is another request, not a cache hit


def test_samples_per_request_on_an_in_process_model_runs_one_call_per_sample(run_suite) -> None:
    result, out = run_suite("--val-n=2", "--samples-per-request=2", "--limit=1", "--max-tokens=8")
    problems, _ = read_results(out)
    assert problems[0]["complete"] is True and len(problems[0]["generations"]) == 2
