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
    r"agenteval (\d+)/16 generations \(\d+%\) \| \d+ tok \(\d+ tok/s\) \| (\d+) in flight "
    r"\| ETA (\?|~\d+(s| min))( \(by --max-tokens\))?"
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


def _server(latency_ms: int) -> OpenAITestServer:
    return OpenAITestServer(ServerConfig(latency_ms=latency_ms, answer="ok \\boxed{70}"))


@pytest.fixture
def quick_server():
    # generations one at a time, 0.15 s each (with --limit=1: 4 of them, a run of 0.6 s)
    with _server(150) as server:
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


# Serial, every finished item redraws the line (16 generations at 0.1 s: 1.6 s), so it is
# seen mid-run whatever the 1 s timer does; with two workers the counts come in their 0.5 s
# reports, and both must be seen in flight at once: 0.4 s a generation there.
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "two-workers"])
def test_the_line_is_redrawn_in_place_while_items_run(
    aime_suite: pytest.Pytester, tiny_aime: Path, workers: list[str]
) -> None:
    # --concurrency 2: one request per worker (below the workers is a start-up error)
    with _server(400 if workers else 100) as server:
        raw = run_in_terminal(
            aime_suite, tiny_aime, server.url, *workers, *(["--concurrency=2"] * bool(workers))
        )
    drawn = [(int(m[1]), int(m[2])) for m in LINE.finditer(raw)]
    done = sorted({d for d, _ in drawn})
    assert any(0 < d < 16 for d in done), done  # seen mid-run, summed over the workers
    assert max(flight for _, flight in drawn) == (2 if workers else 1)  # --concurrency per endpoint
    assert done == sorted(done) and "\b" in raw
    final = screen(raw)
    shown = "\n".join(final)  # the whole screen where an assertion fails
    dots = [line for line in final if re.fullmatch(r"(test_tiny\.py )?[.F]{4} +\[100%\]", line)]
    assert len(dots) == 1, shown  # erased before pytest's own output: nothing of it left on screen
    assert "tok/s" not in shown, shown
    if workers:  # xdist's status line is its final one, as without the plugin
        assert "2 workers [4 items]" in final and "collecting" not in shown, shown


# Our scheduler starts the first worker at its collection, so a slow worker's `ready` and
# collection come while result letters are being written; xdist redrew its status over
# them (`\rready: 2/2 workers`), as the CI machine under load saw once. Here gw1 starts
# only after the controller has reported an item (gw0's).
def test_a_late_worker_draws_no_status_over_the_letters(aime_suite: pytest.Pytester, tiny_aime: Path) -> None:
    first, waited = aime_suite.path / "one-reported", aime_suite.path / "gw1-waited"
    aime_suite.makeconftest(
        f"""
        import time
        from pathlib import Path

        FIRST = Path({str(first)!r})
        CONTROLLER = []

        def pytest_configure(config):  # before this worker says it is ready
            if not hasattr(config, "workerinput"):
                CONTROLLER.append(True)
            elif config.workerinput["workerid"] == "gw1":
                deadline = time.monotonic() + 60
                while not FIRST.exists() and time.monotonic() < deadline:
                    time.sleep(0.05)
                if FIRST.exists():
                    Path({str(waited)!r}).touch()

        def pytest_runtest_logfinish(nodeid, location):
            if CONTROLLER:  # its letter is written
                FIRST.touch()
        """
    )
    with _server(100) as server:
        raw = run_in_terminal(aime_suite, tiny_aime, server.url, "-n", "2", "--concurrency=2")
    assert waited.exists()  # gw1 came after a reported item, not after its 60 s deadline
    final = screen(raw)
    shown = "\n".join(final)
    dots = [line for line in final if re.fullmatch(r"[.F]{4} +\[100%\]", line)]
    assert len(dots) == 1 and "2 workers [4 items]" in final, shown
    assert not re.search("ready|collecting|initialized", shown), shown


# A worker that dies mid-item: xdist writes `replacing crashed worker gw0` outside every
# hook, where the progress line sat after the letters and stayed on screen.
def test_a_crashed_worker_s_line_leaves_no_progress_line_behind(
    aime_suite: pytest.Pytester, tiny_aime: Path
) -> None:
    aime_suite.makeconftest(
        """
        import os

        def pytest_runtest_call(item):
            if item.name == "test_aime25[1]":
                os._exit(3)
        """
    )
    with _server(400) as server:
        raw = run_in_terminal(aime_suite, tiny_aime, server.url, "-n", "2", "--concurrency=2")
    final = screen(raw)
    shown = "\n".join(final)
    assert re.search(r"^replacing crashed worker gw[01]$", shown, re.MULTILINE), shown
    assert "tok/s" not in shown and "2 workers [4 items]" in final, shown


# 0.15 s a generation: the line would be drawn at once (the timer starts with a draw on a
# terminal) and at each item's report, however short the run
@pytest.mark.parametrize("quiet", [["-q", "-q"], ["--agenteval-progress", "off"]], ids=["-q -q", "off"])
def test_silent_when_asked(
    aime_suite: pytest.Pytester, tiny_aime: Path, quick_server: OpenAITestServer, quiet: list[str]
) -> None:
    raw = run_in_terminal(aime_suite, tiny_aime, quick_server.url, "--limit=1", *quiet, status=0)
    assert "tok/s" not in raw and "\b" not in raw


def test_without_a_terminal_a_line_every_few_seconds(run_suite) -> None:
    # 16 generations at 0.25 s: 4 s at least, 4 lines 1 s apart (a line drawn after the last
    # generation says `ETA 0s`, which LINE does not match: as few of those as before)
    with _server(250) as server:
        result, _ = run_suite(
            f"--endpoint={server.url}",
            "--mode=text-only",
            "--val-n=4",
            "--concurrency=1",
            "--agenteval-progress=1",
            subprocess=True,  # the line goes to the process's own stdout, which no in-process run captures
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


def test_rates_come_from_the_last_thirty_seconds() -> None:
    rates = Rates(__import__("collections").deque())
    assert rates.add(0.0, 0, 0) == (0.0, 0.0)
    assert rates.add(10.0, 4, 400) == (0.4, 40.0)
    assert rates.add(100.0, 40, 4000) == pytest.approx(
        (36 / 90, 3600 / 90)
    )  # the first sample left the window


BASE = {"total": 16, "done": 0, "errors": 0, "tokens": 0, "in_flight": 0, "retries": 0}


@pytest.mark.parametrize(
    ("counts", "rates", "max_tokens", "line"),
    [
        # long agentic items before any finished: turns, tool calls and tokens move; the ETA
        # from --max-tokens, said so (16 x 1000 tokens less the 412 generated, at 14 tok/s)
        (
            {"turns": 3, "tool_calls": 5, "tokens": 412, "running_tokens": 412, "in_flight": 2},
            (0.0, 14.0),
            1000,
            "agenteval 0/16 generations (0%) | 3 turns, 5 tool calls | 412 tok (14 tok/s) | "
            "2 in flight | ETA ~19 min (by --max-tokens)",
        ),
        # once some finished: their mean (400 tokens each) times the 10 left, less 200 running: 95 s
        (
            {
                "done": 4,
                "errors": 2,
                "tokens": 1800,
                "finished_tokens": 1600,
                "running_tokens": 200,
                "turns": 1,
                "judge_calls": 1,
                "retries": 1,
            },
            (0.4, 40.0),
            1000,
            "agenteval 4/16 generations (25%) | 1 turn, 1 judge call | 1800 tok (40 tok/s) | "
            "0 in flight | 1 retry | 2 errored | ETA ~2 min",
        ),
        # nothing moves yet: no basis
        ({}, (0.0, 0.0), 1000, "agenteval 0/16 generations (0%) | 0 tok (0 tok/s) | 0 in flight | ETA ?"),
        # no tokens move (cache hits): from generations a second
        (
            {"done": 8},
            (0.5, 0.0),
            1000,
            "agenteval 8/16 generations (50%) | 0 tok (0 tok/s) | 0 in flight | ETA ~16s",
        ),
        # all accounted for, errors included
        (
            {"done": 14, "errors": 2, "tokens": 10, "finished_tokens": 10},
            (0.5, 1.0),
            0,
            "agenteval 14/16 generations (87%) | 10 tok (1 tok/s) | 0 in flight | 2 errored | ETA 0s",
        ),
    ],
    ids=["agentic-before-any-finished", "from-finished-ones", "no-basis", "generation-rate", "over"],
)
def test_the_line_counts_what_moves_and_the_eta_comes_from_tokens(counts, rates, max_tokens, line) -> None:
    assert format_line({**BASE, **counts}, *rates, max_tokens) == line


def test_remote_workers_are_counted_from_the_records_their_reports_carry() -> None:
    counts: dict[str, int] = {}
    add_record(
        counts,
        {
            "val_n": 3,
            "generations": [
                {"completion_tokens": 7, "turns": 3, "code_calls": 2},
                {"completion_tokens": 5, "cached": True},
            ],
        },
    )
    add_record(counts, {"val_n": 2, "generations": [{"completion_tokens": 4}, {"completion_tokens": None}]})
    assert counts == {  # one generation missing: an error, not a finished one; cached tokens not counted
        "done": 4,
        "errors": 1,
        "tokens": 11,
        "finished_tokens": 11,
        "turns": 3,
        "tool_calls": 2,
    }


def _always_call() -> list:
    from pytest_agenteval.testing import Reply

    return [
        Reply(tool_calls=[{"name": "code_interpreter", "arguments": {"code": f"print({i})"}}])
        for i in range(12)
    ]


AGENTIC = re.compile(
    r"agenteval (\d+)/2 generations \(\d+%\) \| (\d+) turns?, (\d+) tool calls? \| (\d+) tok \(\d+ tok/s\) "
    r"\| \d+ in flight \| ETA .+"
)


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "two-workers"])
def test_long_agentic_items_show_turns_tool_calls_and_tokens_moving(run_suite, workers: list[str]) -> None:
    """Two retool generations of 8 turns each, 0.15 s a turn: before either finishes, the
    line's turns, tool calls and tokens grow (summed over the workers under xdist)."""
    from pytest_agenteval.testing import ScriptedToolModel

    config = ServerConfig(script=ScriptedToolModel(_always_call()), latency_ms=150)
    with OpenAITestServer(config) as server:
        result, _ = run_suite(
            f"--endpoint={server.url}",
            "--mode=retool",
            "--limit=2",
            "--val-n=1",
            "--max-assistant-turns=8",
            "--max-code-calls=8",
            "--sandbox-timeout=5",
            "--agenteval-progress=0.25",
            *workers,
            subprocess=True,  # the line goes to the process's own stdout
        )
    lines = [line for line in result.stdout.lines if line.startswith("agenteval ")]
    seen = [AGENTIC.fullmatch(line) for line in lines]
    unfinished = [(int(m[2]), int(m[3]), int(m[4])) for m in seen if m and m[1] == "0"]
    assert len(unfinished) >= 2, lines
    assert unfinished == sorted(unfinished) and unfinished[0] < unfinished[-1], unfinished
    assert all(tokens > 0 for turns, _, tokens in unfinished if turns), unfinished
    if workers:  # xdist's status, not `collecting: 1/2 workers` left behind
        assert "2 workers [2 items]" in result.stdout.lines and "collecting" not in result.stdout.str()


def test_an_in_process_model_counts_tokens_as_it_samples_them() -> None:
    """llama.cpp samples on its own thread: the rollout's tally sees each token."""
    import asyncio

    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from pytest_agenteval.api.sampler import SamplingParams
    from pytest_agenteval.models import LlamaSampler, embedded_model_path
    from pytest_agenteval.run.counters import Counters

    sampler = LlamaSampler(embedded_model_path(), embedded=True)
    counters = Counters()
    params = SamplingParams(temperature=0.0, top_p=1.0, top_k=0, max_tokens=12, seed=1)

    async def rollout() -> object:
        with counters.rollout() as tally:
            completion = await sampler.complete([{"role": "user", "content": "Count to twenty."}], params)
            assert counters.snapshot()["tokens"] == completion.completion_tokens  # counted while running
            return completion, tally

    try:
        completion, tally = asyncio.run(rollout())
    finally:
        asyncio.run(sampler.aclose())
    assert (tally.streaming, completion.completion_tokens) == (12, 12)


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
    assert counts == {  # int(None) raised INTERNALERROR
        "done": 2,
        "errors": 0,
        "tokens": 30,
        "finished_tokens": 30,
        "turns": 0,
        "tool_calls": 0,
    }


def test_rollouts_with_equal_counts_leave_the_running_list_each_its_own() -> None:
    """Tallies compared by value: the second of two rollouts with equal counts (both 0)
    removed the first's tally when it ended, and the first's end then raised 'list.remove(x):
    x not in list', an error of its generation."""
    from pytest_agenteval.run.counters import Counters

    counters = Counters()
    first, second = counters.rollout(), counters.rollout()
    a, b = first.__enter__(), second.__enter__()
    second.__exit__(None, None, None)
    assert len(counters.running) == 1 and counters.running[0] is a
    a.turns += 1
    first.__exit__(None, None, None)
    assert (counters.running, counters.finished_moving["turns"], a is b) == ([], 1, False)
