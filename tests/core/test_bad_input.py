"""Bad input: one clear line at start-up naming the problem and the fix, no traceback."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from tests.conftest import TINY_PROBLEMS, write_jsonl


def _run(pytester: pytest.Pytester, *args: str, subprocess: bool = False) -> pytest.RunResult:
    """In this process (no interpreter to start and import), or in a process of its own
    where the run reads environment variables at import (huggingface_hub's HF_HUB_OFFLINE)."""
    runner = pytester.runpytest_subprocess if subprocess else pytester.runpytest_inprocess
    return runner("-p", "no:cacheprovider", *args)


def _assert_one_line(result: pytest.RunResult, message: str) -> None:
    output = result.stdout.str() + result.stderr.str()
    assert message in output, output
    assert "Traceback" not in output, output


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def replay(pytester: pytest.Pytester) -> str:
    rows = [{"problem_id": p["id"], "sample_index": 0, "text": "x"} for p in TINY_PROBLEMS]
    return f"--model-path=replay:{write_jsonl(pytester.path / 'replay.jsonl', rows)}"


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            [{"id": 0, "question": "q", "answer": "1"}],
            "missing column(s) problem (has answer, id, question); the data needs problem, answer",
        ),
        (
            [{"id": 0, "problem": "a", "answer": "1"}, {"id": 0, "problem": "b", "answer": "2"}],
            "duplicate id 0; ids must be unique",
        ),
        (
            [{"id": 0, "problem": "a", "answer": "1/2"}],
            "answer '1/2' of problem 0 is not an integer; the text-only scorer needs integer answers",
        ),
        ([{"id": 0, "problem": "  ", "answer": "1"}], "problem 0 has an empty `problem`"),
    ],
)
def test_bad_data(aime_suite: pytest.Pytester, replay: str, rows: list, message: str) -> None:
    data = write_jsonl(aime_suite.path / "bad.jsonl", rows)
    result = _run(aime_suite, f"--dataset-path={data}", replay, "--mode=text-only")
    _assert_one_line(result, f"agenteval: --dataset-path {data}: {message}")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error stops the run


def test_missing_data_file(aime_suite: pytest.Pytester, replay: str) -> None:
    result = _run(aime_suite, "--dataset-path=nowhere.jsonl", replay)
    _assert_one_line(result, "--dataset-path nowhere.jsonl: no such file or folder")


def test_unreadable_json(aime_suite: pytest.Pytester, replay: str) -> None:
    (aime_suite.path / "broken.jsonl").write_text('{"id": 0, "problem": "x", "answer": "1"}\n{oops\n')
    result = _run(aime_suite, "--dataset-path=broken.jsonl", replay)
    _assert_one_line(result, "--dataset-path broken.jsonl:2: not valid JSON")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--model-path=missing.gguf",),
            "--model-path missing.gguf: no such file; give an existing .gguf file",
        ),
        (
            ("--model-path=./nowhere/ckpt",),
            "--model-path ./nowhere/ckpt: no such file or folder, and not a hub id (owner/name)",
        ),
        (("--model-path=replay:nope.jsonl",), "replay file nope.jsonl does not exist"),
        (("--agenteval-gate", "aime25.average_at_n => 0.3"), "expected SUITE.METRIC OP NUMBER"),
        (("--agenteval-gate", "aime25.accuracy >= 0.3"), "aime25 has no metric 'accuracy'"),
        (("--val-n=0",), "--val-n must be >= 1, got 0"),
        (("--top-p=1.5",), "--top-p must be in (0, 1], got 1.5"),
        (("--val-n=abc",), "--val-n: 'abc' is not a valid int"),
        (("--endpoint=http://127.0.0.1:1/v1", "--model-path=x.gguf"), "--endpoint and --model-path conflict"),
        (("--mode=chat",), "invalid choice: 'chat'"),
        (("--endpoint=localhost:8000/v1",), "--endpoint localhost:8000/v1 is not an http(s) URL"),
        (("--endpoint=http://127.0.0.1:x/v1",), "--endpoint http://127.0.0.1:x/v1 is not an http(s) URL"),
        (  # the password is not echoed, and never reaches the results
            ("--endpoint=http://me:s3cret@127.0.0.1:1/v1",),
            "--endpoint: credentials in the URL are not supported",
        ),
        (
            ("--judge-endpoint=ftp://127.0.0.1/v1",),
            "--judge-endpoint ftp://127.0.0.1/v1 is not an http(s) URL",
        ),
        (("--endpoint=http://a..b:8000/v1",), "--endpoint http://a..b:8000/v1 is not an http(s) URL"),
    ],
)
def test_bad_options_are_usage_errors(
    aime_suite: pytest.Pytester, tiny_aime: Path, args: tuple, message: str
) -> None:
    result = _run(aime_suite, f"--dataset-path={tiny_aime}", *args)
    _assert_one_line(result, message)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "s3cret" not in result.stdout.str() + result.stderr.str()


def test_unreachable_endpoint(aime_suite: pytest.Pytester, tiny_aime: Path) -> None:
    port = _free_port()
    result = _run(aime_suite, f"--dataset-path={tiny_aime}", f"--endpoint=http://127.0.0.1:{port}/v1")
    _assert_one_line(
        result,
        f"cannot reach --endpoint http://127.0.0.1:{port}/v1 ([Errno 111] Connection "
        "refused); start the server or fix the URL",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through file permissions")
def test_unwritable_output_path_as_user(aime_suite: pytest.Pytester, tiny_aime: Path, replay: str) -> None:
    locked = aime_suite.mkdir("locked")
    locked.chmod(0o500)
    result = _run(aime_suite, f"--dataset-path={tiny_aime}", replay, f"--agenteval-out={locked}/r.jsonl")
    _assert_one_line(result, f"--agenteval-out {locked}/r.jsonl: not writable")


def test_output_path_under_a_file_is_unwritable(
    aime_suite: pytest.Pytester, tiny_aime: Path, replay: str
) -> None:
    (aime_suite.path / "plain").write_text("a file, not a folder")
    result = _run(aime_suite, f"--dataset-path={tiny_aime}", replay, "--agenteval-out=plain/r.jsonl")
    _assert_one_line(result, "--agenteval-out plain/r.jsonl: not writable (")
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_hub_unavailable_names_the_offline_option(
    aime_suite: pytest.Pytester, replay: str, monkeypatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(aime_suite.path / "hf-home"))  # an empty hub cache
    result = _run(aime_suite, replay, "--dataset-id=someone/missing-set", subprocess=True)
    _assert_one_line(result, "agenteval: cannot load hub dataset someone/missing-set (")
    _assert_one_line(result, "); for offline runs pass --dataset-path FILE")
    assert result.ret == pytest.ExitCode.INTERRUPTED


@pytest.mark.parametrize(
    ("rows", "suffix", "message"),
    [
        (None, ".jsonl", "--dataset-path data/aime25.jsonl: no such file or folder"),
        (
            [{"id": 0, "problem": "a", "answer": "1"}, {"id": 1, "answer": "2"}],
            ".jsonl",
            "row 2 has no problem; every row needs them",
        ),
        ("[{broken", ".json", ": not valid JSON"),
    ],
)
def test_bad_data_files(aime_suite: pytest.Pytester, replay: str, rows, suffix: str, message: str) -> None:
    if rows is None:
        target = "data/aime25.jsonl"  # a mistyped path is not taken for a hub id
    else:
        target = f"data{suffix}"
        path = aime_suite.path / target
        if isinstance(rows, str):
            path.write_text(rows)
        else:
            write_jsonl(path, rows)
    result = _run(aime_suite, f"--dataset-path={target}", replay)
    _assert_one_line(result, message)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--bfcl-weights=simple=2",), "--bfcl-weights: unknown category 'simple'; use the categories"),
        (("--bfcl-weights=multiple=-1",), "--bfcl-weights: 'multiple=-1': weights must be >= 0"),
        (("--bfcl-style=native",), "--bfcl-style native sends functions as `tools`, which in-process"),
    ],
)
def test_bad_bfcl_options_fail_at_start_up(
    aime_suite: pytest.Pytester, tiny_aime: Path, args, message
) -> None:
    result = _run(aime_suite, f"--dataset-path={tiny_aime}", *args)
    _assert_one_line(result, message)
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_every_endpoint_must_serve_the_model(aime_suite: pytest.Pytester, tiny_aime: Path) -> None:
    from pytest_agenteval.testing import OpenAITestServer, ServerConfig

    with OpenAITestServer(ServerConfig(model="a")) as one, OpenAITestServer(ServerConfig(model="b")) as two:
        result = _run(
            aime_suite, f"--dataset-path={tiny_aime}", f"--endpoint={one.url}", f"--endpoint={two.url}"
        )
    _assert_one_line(result, f"--model-name 'a' is not served by {two.url} (it serves: b)")
