"""API keys: surrounding whitespace (a key mounted from a file ends in a newline) is
stripped; a key with a control character inside is one start-up line naming the variable;
the key itself is never printed nor written, in any output, results, JUnit file or log."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_agenteval.api.sampler import SamplingParams
from pytest_agenteval.models.backends.openai import OpenAISampler
from pytest_agenteval.models.backends.tinker import TinkerAdapter
from pytest_agenteval.models.backends.trio import TrioAdapter
from pytest_agenteval.models.keys import ApiKeyError, api_key_from_env
from pytest_agenteval.models.schemes import StartupError
from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import read_results

SECRET = "SECRET-123"  # the part of every key below that no file or output may hold
BAD_KEYS = [  # (value, what is wrong with it)
    (f"sk-{SECRET}\x01", "a control character inside"),
    ("sk-SEC\nRET-123\n", "a newline inside"),
    (f"sk-{SECRET}\r\nX-Injected: 1", "a header injection"),
    (f"sk-{SECRET}\x7f", "DEL"),
    (f"sk-{SECRET}é", "a non-ASCII character"),
]


def everything_written(root: Path, result: pytest.RunResult) -> dict[str, str]:
    """The run's stdout and stderr and every file under its folder (results, JUnit, logs)."""
    texts = {"stdout": result.stdout.str(), "stderr": result.stderr.str()}
    for path in root.rglob("*"):
        if path.is_file():
            texts[str(path.relative_to(root))] = path.read_bytes().decode("utf-8", "replace")
    return texts


@pytest.mark.parametrize(
    ("variable", "value", "args"),
    [
        ("OPENAI_API_KEY", f"sk-{SECRET}\n", ()),
        ("OPENAI_API_KEY", f"  sk-{SECRET}\r\n", ("-n", "2")),
        ("MY_EVAL_KEY", f"\tsk-{SECRET}\n", ("--api-key-env=MY_EVAL_KEY",)),
    ],
)
def test_surrounding_whitespace_is_stripped_and_the_key_is_written_nowhere(
    run_suite, aime_suite: pytest.Pytester, monkeypatch, variable: str, value: str, args: tuple[str, ...]
) -> None:
    monkeypatch.setenv(variable, value)
    answers = {"30 + 40": "\\boxed{70}", "12 * 49": "\\boxed{588}"}
    with OpenAITestServer(ServerConfig(api_key=f"sk-{SECRET}", answers=answers)) as server:
        result, out = run_suite(
            f"--endpoint={server.url}",
            "--val-n=2",
            "--limit=2",
            f"--junitxml={aime_suite.path / 'junit.xml'}",
            f"--log-file={aime_suite.path / 'run.log'}",
            "--log-file-level=DEBUG",
            *args,
        )
        outcomes = [entry["outcome"] for entry in server.requests]
    assert result.ret == 0, result.stderr.str()
    assert outcomes == ["ok"] * 4  # every request carried the stripped key
    problems, (summary,) = read_results(out)
    assert (len(problems), summary["generations"]) == (2, 4)
    texts = everything_written(aime_suite.path, result)
    assert {"results.jsonl", "junit.xml", "run.log"} <= texts.keys()
    assert [name for name, text in texts.items() if SECRET in text] == []


@pytest.mark.parametrize(("value", "why"), BAD_KEYS, ids=[why for _, why in BAD_KEYS])
def test_a_key_no_header_can_carry_is_one_start_up_line_naming_the_variable(
    run_suite, aime_suite: pytest.Pytester, monkeypatch, value: str, why: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", value)
    with OpenAITestServer() as server:
        result, _ = run_suite(
            f"--endpoint={server.url}",
            f"--junitxml={aime_suite.path / 'junit.xml'}",
            f"--log-file={aime_suite.path / 'run.log'}",
        )
        requests = server.requests
    assert result.ret == 4  # a usage error, before any request
    assert requests == []
    assert "Traceback" not in result.stderr.str()
    assert [line for line in result.stderr.lines if line.startswith("ERROR")] == [
        "ERROR: OPENAI_API_KEY holds a control or non-ASCII character inside the API key, which "
        "an HTTP header cannot carry; set OPENAI_API_KEY to the key alone"
    ]
    texts = everything_written(aime_suite.path, result)
    assert [name for name, text in texts.items() if SECRET in text or "SEC\nRET" in text] == []


def test_a_judge_key_is_checked_at_start_up(monkeypatch) -> None:
    from pytest_agenteval.tasks.datagen import check_judge_options

    monkeypatch.setenv("JUDGE_KEY", f"sk-{SECRET}\x02")
    settings = SimpleNamespace(
        judge_endpoints=["http://127.0.0.1:9/v1"], judge_models=["judge"], api_key_env="JUDGE_KEY"
    )
    with pytest.raises(pytest.UsageError) as caught:
        check_judge_options(settings)
    assert str(caught.value) == (
        "JUDGE_KEY holds a control or non-ASCII character inside the API key, which an HTTP header "
        "cannot carry; set JUDGE_KEY to the key alone"
    )


@pytest.mark.parametrize("adapter", [TrioAdapter(), TinkerAdapter()], ids=["trio", "tinker"])
def test_sdk_keys_are_read_by_the_same_rule(monkeypatch, adapter) -> None:
    monkeypatch.delenv("TINKER_CREDENTIAL_CMD", raising=False)
    monkeypatch.setenv(adapter.key_env, f" sk-{SECRET}\n")
    assert adapter.require_key() == f"sk-{SECRET}"
    monkeypatch.setenv(adapter.key_env, f"sk-{SECRET}\x1b[0m")
    with pytest.raises(StartupError) as caught:
        adapter.require_key()
    assert str(caught.value) == (
        f"{adapter.scheme}://: {adapter.key_env} holds a control or non-ASCII character inside the "
        f"API key, which an HTTP header cannot carry; set {adapter.key_env} to the key alone"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (f"sk-{SECRET}\n", f"sk-{SECRET}"),
        (f"\r\n sk-{SECRET} \t", f"sk-{SECRET}"),
        ("key with inner spaces", "key with inner spaces"),
        ("\n", None),
        ("", None),
    ],
)
def test_api_key_from_env(monkeypatch, value: str, expected: str | None) -> None:
    monkeypatch.setenv("SOME_KEY", value)
    assert api_key_from_env("SOME_KEY") == expected


def test_the_sampler_and_its_token_counter_send_the_stripped_key(monkeypatch) -> None:
    monkeypatch.setenv("MY_EVAL_KEY", f"sk-{SECRET}\n")

    async def go(url: str) -> tuple[str, int]:
        sampler = OpenAISampler([url], "mock-model", api_key_env="MY_EVAL_KEY")
        try:
            completion = await sampler.complete(
                [{"role": "user", "content": "hi"}], SamplingParams(1.0, 1.0, 0, 64, 0)
            )
            return completion.text, await sampler.counter.count_text("hello")
        finally:
            await sampler.aclose()

    config = ServerConfig(api_key=f"sk-{SECRET}", answer="\\boxed{70}", tokenize="vllm")
    with OpenAITestServer(config) as server:
        assert asyncio.run(go(server.url)) == ("\\boxed{70}", 5)  # one token a character


def test_the_sampler_refuses_a_bad_key_naming_only_the_variable(monkeypatch) -> None:
    monkeypatch.setenv("MY_EVAL_KEY", f"sk-{SECRET}\x07")
    with pytest.raises(ApiKeyError) as caught:
        OpenAISampler(["http://127.0.0.1:9/v1"], "m", api_key_env="MY_EVAL_KEY")
    assert str(caught.value) == (
        "MY_EVAL_KEY holds a control or non-ASCII character inside the API key, which an HTTP "
        "header cannot carry; set MY_EVAL_KEY to the key alone"
    )
