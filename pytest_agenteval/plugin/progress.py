"""The live progress line of a long run: generations done / total, what moves inside the
ones still running (turns, tool calls, judge calls, tokens as they are generated), tokens
per second, requests in flight, retries, errored generations and an ETA from tokens, on the
controller, summed over xdist workers. Each worker sends its counters (cumulative, so a lost
datagram costs nothing) to the controller over a loopback UDP socket twice a second; the
controller redraws the line in place on a terminal and prints it every 30 s otherwise."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_agenteval.api.records import counted_usage
from pytest_agenteval.plugin.items import problem_of, suite_of

WORKER_KEY = "agenteval_progress"  # workerinput: the controller's "host:port"
SEND_EVERY_S = 0.5
TTY_EVERY_S = 1.0
LINES_EVERY_S = 30.0
WINDOW_S = 30.0  # rates over the last 30 s
MIN_ROOM = 24
SUMMED = (
    "done",
    "errors",
    "tokens",
    "finished_tokens",
    "running_tokens",
    "turns",
    "tool_calls",
    "judge_calls",
    "in_flight",
    "retries",
)  # columns needed beside pytest's own line to draw anything


def snapshot(runtime: Any) -> dict[str, int]:
    return {
        **runtime.progress.snapshot(),
        "in_flight": runtime.in_flight(),
        "retries": int(runtime.backend_counts().get("retries", 0)),
    }


def count_generations(runtime: Any, items: Any) -> int:
    total = 0
    for item in items:
        suite, problem = suite_of(getattr(item, "module", None)), problem_of(item)
        if suite is not None and problem is not None:
            total += runtime.sample_count(suite, problem)
    return total


def add_record(counts: dict[str, int], record: Mapping[str, Any]) -> None:
    """Count one finished item (a results line) into `counts`: its generations are done,
    the ones missing are errors, the tokens generated (not cached) are added."""
    generations = record.get("generations") or ()
    n = int(record.get("val_n", len(generations)))
    tokens = sum(_completion_tokens(g) for g in generations if not g.get("cached"))
    counts["done"] = counts.get("done", 0) + len(generations)
    counts["errors"] = counts.get("errors", 0) + n - len(generations)
    for key in ("tokens", "finished_tokens"):
        counts[key] = counts.get(key, 0) + tokens
    for key, field in (("turns", "turns"), ("tool_calls", "code_calls")):
        counts[key] = counts.get(key, 0) + sum(int(g.get(field) or 0) for g in generations)


def _completion_tokens(generation: dict[str, Any]) -> int:
    """A results line's generation as `api.records.counted_tokens` counts a rollout."""
    return counted_usage(0, generation.get("completion_tokens"), generation)[1]


@dataclass
class Rates:
    """Generations and tokens per second over the last WINDOW_S seconds."""

    history: deque[tuple[float, int, int]]

    def add(self, now: float, done: int, tokens: int) -> tuple[float, float]:
        self.history.append((now, done, tokens))
        while len(self.history) > 2 and now - self.history[1][0] >= WINDOW_S:
            self.history.popleft()
        then, done_then, tokens_then = self.history[0]
        span = now - then
        if span <= 0:
            return 0.0, 0.0
        return (done - done_then) / span, (tokens - tokens_then) / span


def _minutes(seconds: float) -> str:
    return f"~{max(1, round(seconds / 60))} min" if seconds >= 90 else f"~{max(1, round(seconds))}s"


def eta(totals: Mapping[str, int], generation_rate: float, token_rate: float, max_tokens: int) -> str:
    """From tokens where tokens move: the tokens a generation takes (the mean of the
    finished ones; --max-tokens, said so, before any finished), times those
    left, less what running ones generated so far, at the recent rate; from generations
    a second where no tokens move (cache hits, a replay). `?` until there is a basis."""
    left = totals["total"] - totals["done"] - totals["errors"]
    if left <= 0:
        return "ETA 0s"
    done, finished_tokens = totals["done"], totals.get("finished_tokens", 0)
    if token_rate > 0 and (finished_tokens > 0 or max_tokens > 0):
        per_generation = finished_tokens / done if done and finished_tokens else max_tokens
        remaining = max(0.0, per_generation * left - totals.get("running_tokens", 0))
        basis = "" if done and finished_tokens else " (by --max-tokens)"
        return f"ETA {_minutes(remaining / token_rate)}{basis}"
    if generation_rate > 0:
        return f"ETA {_minutes(left / generation_rate)}"
    return "ETA ?"


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def format_line(
    totals: Mapping[str, int], generation_rate: float, token_rate: float, max_tokens: int = 0
) -> str:
    """`agenteval 1/4 generations (25%) | 3 turns, 5 tool calls | 412 tok (14 tok/s) |
    2 in flight | 1 errored | ETA ~6 min`: what moves inside long generations is shown
    once it moves; retries and errors once there are some."""
    total, done = totals["total"], totals["done"]
    share = f" ({100 * done // total}%)" if total else ""
    parts = [f"agenteval {done}/{total or '?'} generations{share}"]
    moving = [
        _plural(totals.get(key, 0), one, many)
        for key, one, many in (
            ("turns", "turn", "turns"),
            ("tool_calls", "tool call", "tool calls"),
            ("judge_calls", "judge call", "judge calls"),
        )
        if totals.get(key, 0)
    ]
    if moving:
        parts.append(", ".join(moving))
    parts.append(f"{totals.get('tokens', 0)} tok ({token_rate:.0f} tok/s)")
    parts.append(f"{totals.get('in_flight', 0)} in flight")
    if totals.get("retries", 0):
        parts.append(_plural(totals["retries"], "retry", "retries"))
    if totals["errors"]:
        parts.append(f"{totals['errors']} errored")
    parts.append(eta(totals, generation_rate, token_rate, max_tokens))
    return " | ".join(parts)


class ProgressSender:
    """On an xdist worker: this process's counters to the controller, twice a second."""

    def __init__(self, runtime: Any, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.runtime, self.target = runtime, (host, int(port))
        self.worker = os.environ.get("PYTEST_XDIST_WORKER", str(os.getpid()))
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="agenteval-progress", daemon=True)

    def _send(self) -> None:
        data = json.dumps({"worker": self.worker, **snapshot(self.runtime)}).encode()
        with contextlib.suppress(OSError):
            self.socket.sendto(data, self.target)

    def _run(self) -> None:
        while not self.stopped.wait(SEND_EVERY_S):
            self._send()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.runtime.progress.total = count_generations(self.runtime, session.items)
        self.thread.start()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        self.stopped.set()
        self._send()


class ProgressDisplay:
    """On the controller (or the only process). On a terminal the line sits after what
    pytest has written on the current line and is erased before pytest writes again
    (every hook that writes is wrapped); elsewhere it is printed as its own line. It
    writes to a duplicate of the terminal's descriptor, which pytest's output capture
    (active while an item runs without xdist) does not redirect."""

    def __init__(self, config: pytest.Config, runtime: Any, every_s: float | None) -> None:
        self.config, self.runtime = config, runtime
        self.reporter = config.pluginmanager.get_plugin("terminalreporter")
        self.out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1, closefd=True)
        self.tty = self.out.isatty() and every_s is None
        self.every_s = TTY_EVERY_S if self.tty else (every_s or LINES_EVERY_S)
        self.lock = threading.Lock()
        self.hidden = 0
        self.items_started = False
        self.drawn = 0  # characters of the line now on screen (terminal mode)
        self.workers: dict[str, dict[str, int]] = {}  # local worker -> its latest counters
        self.reported: dict[str, dict[str, int]] = {}  # remote worker -> counts from its reports
        self.rates = Rates(deque([(time.monotonic(), 0, 0)]))  # from the start: a first line has a rate
        self.stopped = threading.Event()
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", 0))
        self.socket.settimeout(0.1)
        self.thread = threading.Thread(target=self._run, name="agenteval-progress", daemon=True)

    # -- what to show ------------------------------------------------------------------
    def totals(self) -> dict[str, int]:
        parts = [*self.workers.values(), *self.reported.values()] or [snapshot(self.runtime)]
        summed = {key: sum(p.get(key, 0) for p in parts) for key in SUMMED}
        return {"total": max(p.get("total", 0) for p in parts), **summed}

    def line(self) -> str:
        totals = self.totals()
        generation_rate, token_rate = self.rates.add(time.monotonic(), totals["done"], totals["tokens"])
        settings = self.runtime.settings
        # the budget stands in for the ETA only where the user set it: each suite (and retool's
        # turns) has a default of its own
        budget = int(settings.max_tokens or 0) if "max_tokens" in settings.explicit else 0
        return format_line(totals, generation_rate, token_rate, budget)

    # -- drawing -----------------------------------------------------------------------
    def _erase(self) -> None:
        if self.drawn:
            self.out.write("\b" * self.drawn + "\x1b[K")
            self.out.flush()
            self.drawn = 0

    def _draw(self, text: str) -> None:
        if self.hidden or not self.items_started:
            return
        writer = self.reporter._tw if self.reporter else None
        if self.tty:
            room = (writer.fullwidth - writer.width_of_current_line - 1) if writer else 80
            self._erase()
            if room >= MIN_ROOM:
                shown = (" " if writer and writer.width_of_current_line else "") + text[: room - 1]
                self.out.write(shown)
                self.drawn = len(shown)
        else:
            pending = writer is not None and writer.width_of_current_line > 0
            self.out.write(("\n" if pending else "") + text + "\n")
        self.out.flush()

    def _run(self) -> None:
        due = time.monotonic() + (self.every_s if not self.tty else 0.0)
        while not self.stopped.is_set():
            with contextlib.suppress(OSError, ValueError):
                data = json.loads(self.socket.recv(4096))
                self.workers[str(data.pop("worker"))] = data
            if time.monotonic() >= due:
                text = self.line()
                with self.lock:
                    self._draw(text)
                due = time.monotonic() + self.every_s

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Around a hook in which pytest writes: the line off the screen, then back."""
        with self.lock:
            self._erase()
            self.hidden += 1
        try:
            yield
        finally:
            with self.lock:
                self.hidden -= 1
                if self.reporter is not None:
                    self.reporter._tw.flush()  # pytest's text first, then the line after it
                if self.tty and self.thread.is_alive():
                    self._draw(self.line())

    # -- hooks -------------------------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        if not node.gateway.spec.popen:  # --tx ssh=/socket=: our loopback is not theirs
            self.reported[node.gateway.id] = {}
            return
        host, port = self.socket.getsockname()
        node.workerinput[WORKER_KEY] = f"{host}:{port}"

    def _count_reported(self, report: pytest.TestReport) -> None:
        """A remote worker's finished items, from the records its reports carry."""
        node = getattr(getattr(report, "node", None), "gateway", None)
        counts = self.reported.get(getattr(node, "id", None)) if node is not None else None
        if counts is None:
            return
        from pytest_agenteval.api.records import RECORD_KEY

        for name, record in report.user_properties:
            if name == RECORD_KEY:
                add_record(counts, record)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.runtime.progress.total = count_generations(self.runtime, session.items)

    @pytest.hookimpl(wrapper=True, trylast=True)  # inside the terminal's: off before its [100%]
    def pytest_runtestloop(self, session: pytest.Session) -> Iterator[Any]:
        dsession = self.config.pluginmanager.get_plugin("dsession")
        if dsession is not None:  # its lines outside hooks: `replacing crashed worker gw0`
            report_line = dsession.report_line

            def paused_report_line(line: str) -> None:
                with self.paused():
                    report_line(line)

            dsession.report_line = paused_report_line
        self.thread.start()
        try:
            return (yield)
        finally:
            self.stopped.set()
            self.thread.join(timeout=5)
            with self.lock:
                self._erase()
            self.socket.close()
            self.out.close()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> Iterator[Any]:
        self.items_started = True  # xdist has written its start-up status lines by now
        with self.paused():
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Iterator[Any]:
        self._count_reported(report)
        with self.paused():
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> Iterator[Any]:
        with self.paused():
            return (yield)

    @pytest.hookimpl(wrapper=True, optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> Iterator[Any]:
        with self.paused():
            return (yield)

    @pytest.hookimpl(wrapper=True, optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Any) -> Iterator[Any]:
        with self.paused():
            return (yield)


class XdistStatus:
    """xdist's status line under our scheduler (`--dist load`, `-n`'s default), which
    starts at the first worker's collection: xdist then showed `collecting: 1/2 workers`
    and left it on screen, and a later worker's `ready` or collection redrew the status (a
    carriage return and the line) over the row of result letters. Here the first
    collection stands for all (the scheduler compares every later one with it and fails
    the run on a difference): its status is drawn once, as xdist's final one, and nothing
    is redrawn after it."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.collected = False

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Any) -> None:
        dsession = self.config.pluginmanager.get_plugin("dsession")
        trdist = getattr(dsession, "trdist", None)
        specs = getattr(getattr(dsession, "nodemanager", None), "specs", None)
        if trdist is None or not specs or self.collected:
            return
        self.collected = True
        from xdist.dsession import WorkerStatus

        for i, spec in enumerate(specs, 1):
            trdist.setstatus(
                spec, WorkerStatus.CollectionDone, tests_collected=len(ids), show=i == len(specs)
            )
        setstatus = trdist.setstatus  # xdist's own call for this collection follows: not shown either
        trdist.setstatus = lambda *args, **kwargs: setstatus(*args, **{**kwargs, "show": False})


def parse_mode(mode: str) -> float | None:
    """None: auto; 0: off; else the seconds between printed lines."""
    if mode in ("auto", "off"):
        return None if mode == "auto" else 0.0
    try:
        seconds = float(mode)
    except ValueError:
        seconds = -1.0
    if seconds <= 0:
        raise pytest.UsageError(
            f"--agenteval-progress {mode!r}: use auto (redraw on a terminal, a line every 30 s "
            "otherwise), off, or a number of seconds between lines"
        )
    return seconds


def install(config: pytest.Config, runtime: Any, evaluating: bool, mode: str) -> None:
    """Start the progress line's part on this process: `mode` is auto, off or SECONDS."""
    every_s = parse_mode(mode)
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None and config.getoption("dist", None) == "load":  # our scheduler's mode
        config.pluginmanager.register(XdistStatus(config), "agenteval-xdist-status")
    if workerinput is not None:
        if workerinput.get(WORKER_KEY):
            config.pluginmanager.register(
                ProgressSender(runtime, workerinput[WORKER_KEY]), "agenteval-progress"
            )
        return
    if not evaluating or every_s == 0 or config.option.collectonly or config.get_verbosity() <= -2:
        return
    if config.pluginmanager.get_plugin("terminalreporter") is None:
        return
    try:
        display = ProgressDisplay(config, runtime, every_s)
    except (OSError, ValueError, AttributeError):  # no real stdout (an in-process pytester run)
        return
    config.pluginmanager.register(display, "agenteval-progress")
