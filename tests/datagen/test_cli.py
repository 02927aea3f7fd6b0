"""The `pytest-agenteval` command: subcommand dispatch and one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_agenteval.cli import SUBCOMMANDS, main


def test_review_is_a_subcommand() -> None:
    assert "review" in SUBCOMMANDS


def test_no_subcommand_prints_usage(capsys) -> None:
    assert main([]) == 2
    assert "usage: pytest-agenteval {cache, list, merge, report, review}" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_lists_the_subcommands_and_exits_zero(flag: str) -> None:
    """It printed only the usage line and exited 2."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest_agenteval", flag],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    assert lines[0] == "usage: pytest-agenteval {cache, list, merge, report, review} ..."
    assert lines[4:10] == [
        "subcommands:",
        "  cache    the generation cache: info, prune --older-than 30d, clear",
        "  list     the shipped suites, presets and backends (--json: as data); offline",
        "  merge    join the results files of a sharded run (--agenteval-shard I/N), then gate",
        "  report   compare results files: a Markdown/HTML report with paired differences",
        "  review   a self-contained HTML page to review and rate generations",
    ]


def test_an_unknown_subcommand_is_named(capsys) -> None:
    assert main(["reprot"]) == 2
    assert capsys.readouterr().err.splitlines()[1] == (
        "pytest-agenteval: unknown subcommand 'reprot'; see pytest-agenteval --help"
    )


def test_a_missing_data_file_is_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest_agenteval", "review", str(tmp_path / "nope.jsonl"), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"pytest-agenteval review: {tmp_path / 'nope.jsonl'}: cannot read (No such file or "
        "directory); give a JSONL of generated problems"
    ]


def test_the_review_server_refuses_foreign_origins_and_missing_tokens(tmp_path: Path) -> None:
    import json
    import re
    import signal
    import urllib.error
    import urllib.request

    data = tmp_path / "generated.jsonl"
    data.write_text(json.dumps({"id": "g1", "problem": "p", "answer": "1"}) + "\n", encoding="utf-8")
    server = subprocess.Popen(
        [sys.executable, "-m", "pytest_agenteval", "review", str(data), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        url = re.search(r"(http://127\.0\.0\.1:\d+/)", server.stdout.readline()).group(1)
        token = json.loads(urllib.request.urlopen(f"{url}api/items", timeout=10).read())["token"]
        body = {
            "scores": {"correctness": 3, "clarity": 3, "difficulty_match": 3, "completeness": 3},
            "status": "approved",
            "base_revision": 0,
        }

        def put(headers: dict[str, str]) -> int:
            request = urllib.request.Request(
                f"{url}api/verifications/g1", json.dumps(body).encode(), headers, method="PUT"
            )
            try:
                return urllib.request.urlopen(request, timeout=10).status
            except urllib.error.HTTPError as exc:
                return exc.code

        assert put({"X-Review-Token": token, "Origin": "http://evil.example"}) == 403
        assert put({}) == 403
        assert not (tmp_path / "generated_verifications.json").exists()
        assert put({"X-Review-Token": token, "Origin": url.rstrip("/")}) == 200
        assert put({"X-Review-Token": token}) == 409  # base_revision 0 is stale now
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=10)
