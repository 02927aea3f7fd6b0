"""The live progress line, seen as a user sees it: pytest in a pseudo-terminal (pexpect)
against the test server in slow mode, with and without xdist; silent with -q -q and
`--agenteval-progress off`; a line every few seconds when stdout is not a terminal."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from pytest_agenteval.plugin.progress import Rates, add_record, format_line
from pytest_agenteval.testing import OpenAITestServer, ServerConfig

LINE = re.compile(
    r"agenteval (\d+)/16 generations \(\d+%\) \| \d+ tok/s \| (\d+) in flight \| 0 retries \| 0 errors "
    r"\| ETA \S+"
)


def screen(raw: str) -> list[str]:
    """What a terminal shows after `raw`: backspace, carriage return, erase-to-end-of-line."""
    lines, row, col = [[]], 0, 0
    raw = re.sub(r"\x1b\[[0-9;]*m", "", raw)
    for token in re.findall(r"\x1b\[K|.|\n", raw, re.DOTALL):
        if token == "\x1b[K":
            del lines[row][col:]
        elif token == "\r":
            col = 0
        elif token == "\n":
            row, col = row + 1, 0
            lines.append([])
        elif token == "\b":
            col = max(0, col - 1)
        else:
            line = lines[row]
            line.extend(" " * (col - len(line)))
            line[col : col + 1] = [token]
            col += 1
    return ["".join(line).rstrip() for line in lines]


@pytest.fixture
def slow_server():
    # 16 generations one at a time, 0.4 s each: a run of several seconds
    with OpenAITestServer(ServerConfig(latency_ms=400, answer="ok \\boxed{70}")) as server:
        yield server


def run_in_terminal(
    aime_suite: pytest.Pytester, tiny_aime: Path, url: str, *args: str, status: int = 1
) -> str:
    pexpect = pytest.importorskip("pexpect", reason="pip install pexpect")
    child = pexpect.spawn(
        sys.executable,
        [
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            f"--dataset-path={tiny_aime}",
            f"--endpoint={url}",
            "--mode=text-only",
            "--val-n=4",
            "--concurrency=1",
            "--agenteval-out=r.jsonl",
            "-W",
            "ignore",
            *args,
        ],
        cwd=str(aime_suite.path),
        dimensions=(40, 150),
        env={**os.environ, "COLUMNS": "150"},
        timeout=120,
        encoding="utf-8",
    )
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == status, child.before  # plain pytest semantics: unsolved problems fail
    return child.before


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "two-workers"])
def test_the_line_is_redrawn_in_place_while_items_run(
    aime_suite: pytest.Pytester, tiny_aime: Path, slow_server: OpenAITestServer, workers: list[str]
) -> None:
    raw = run_in_terminal(aime_suite, tiny_aime, slow_server.url, *workers)
    drawn = [(int(m[1]), int(m[2])) for m in LINE.finditer(raw)]
    done = sorted({d for d, _ in drawn})
    assert any(0 < d < 16 for d in done), done  # seen mid-run, summed over the workers
    assert max(flight for _, flight in drawn) == (2 if workers else 1)  # --concurrency per endpoint
    assert done == sorted(done) and "\b" in raw
    final = screen(raw)
    dots = [line for line in final if re.fullmatch(r"(test_tiny\.py )?[.F]{4} +\[100%\]", line)]
    assert len(dots) == 1, final  # erased before pytest's own output: nothing of it left on screen
    assert not any("tok/s" in line for line in final)


@pytest.mark.parametrize("quiet", [["-q", "-q"], ["--agenteval-progress", "off"]], ids=["-q -q", "off"])
def test_silent_when_asked(
    aime_suite: pytest.Pytester, tiny_aime: Path, slow_server: OpenAITestServer, quiet: list[str]
) -> None:
    raw = run_in_terminal(aime_suite, tiny_aime, slow_server.url, "--limit=1", *quiet, status=0)
    assert "tok/s" not in raw and "\b" not in raw


def test_without_a_terminal_a_line_every_few_seconds(run_suite, slow_server: OpenAITestServer) -> None:
    result, _ = run_suite(
        f"--endpoint={slow_server.url}",
        "--mode=text-only",
        "--val-n=4",
        "--concurrency=1",
        "--agenteval-progress=1",
    )
    lines = [line for line in result.stdout.lines if line.startswith("agenteval ")]
    assert len(lines) >= 3 and all(LINE.fullmatch(line) for line in lines), lines
    assert "\b" not in result.stdout.str()


def test_a_bad_progress_value_is_a_usage_error(run_suite) -> None:
    result, _ = run_suite("--model-path=replay:none.jsonl", "--agenteval-progress=soon")
    assert result.ret == 4
    assert (
        "--agenteval-progress 'soon': use auto (redraw on a terminal, a line every 30 s otherwise), "
        "off, or a number of seconds between lines" in result.stderr.str()
    )


def test_rates_and_eta_come_from_the_last_thirty_seconds() -> None:
    rates = Rates(__import__("collections").deque())
    assert rates.add(0.0, 0, 0) == (0.0, 0.0)
    assert rates.add(10.0, 4, 400) == (0.4, 40.0)
    totals = {"total": 16, "done": 4, "errors": 1, "tokens": 400, "in_flight": 3, "retries": 2}
    assert format_line(totals, 0.4, 40.0) == (
        "agenteval 4/16 generations (25%) | 40 tok/s | 3 in flight | 2 retries | 1 errors | ETA 30s"
    )
    assert rates.add(100.0, 40, 4000) == pytest.approx(
        (36 / 90, 3600 / 90)
    )  # the first sample left the window


def test_remote_workers_are_counted_from_the_records_their_reports_carry() -> None:
    counts: dict[str, int] = {}
    add_record(
        counts,
        {"val_n": 3, "generations": [{"completion_tokens": 7}, {"completion_tokens": 5, "cached": True}]},
    )
    add_record(counts, {"val_n": 2, "generations": [{"completion_tokens": 4}, {"completion_tokens": 1}]})
    assert counts == {
        "done": 5,
        "errors": 1,
        "tokens": 12,
    }  # one generation missing; cached tokens not counted


def test_samples_of_one_request_count_its_usage_once_from_a_remote_record() -> None:
    counts: dict[str, int] = {}
    usage = {"prompt_tokens": 9, "completion_tokens": 30}
    add_record(
        counts,
        {
            "val_n": 2,
            "generations": [
                {"completion_tokens": None, "request_usage": usage},
                {"completion_tokens": None, "request_usage": {}},
            ],
        },
    )
    assert counts == {"done": 2, "errors": 0, "tokens": 30}  # int(None) raised INTERNALERROR
