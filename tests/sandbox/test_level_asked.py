"""A sandbox level the user names is given or the run does not start; the automatic default
may degrade, and then says so in the terminal summary. The machine really lacks a mechanism
here: bubblewrap is not on the PATH the run gets (a real condition, no patched probe)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.sandbox import _probe, probe_containment
from pytest_agenteval.testing import OpenAITestServer, Reply, ScriptedToolModel, ServerConfig
from tests.conftest import SUITE_FILE, TINY_PROBLEMS, read_results, replay_rows, write_jsonl

NO_BWRAP = str(Path(sys.executable).parent)  # the interpreter's folder: no bwrap there
BWRAP_MISSING = (
    "--sandbox-level bwrap: this machine cannot give it: bwrap is unavailable (bwrap is not on PATH): "
    "install bubblewrap (apt-get install bubblewrap, dnf install bubblewrap) and allow unprivileged "
    "user namespaces (docs/sandbox.md#installing-bubblewrap); or pass --sandbox-level auto for the "
    "strongest level it gives"
)
DEGRADED = "sandbox level auto, without bwrap: unavailable (docs/sandbox.md)"  # spaces squeezed


def _needs(level: str, path: str) -> None:
    """The cases that expect a level to work need this machine to give it on the usual PATH."""
    if path != NO_BWRAP and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed here: apt-get install bubblewrap")
    missing = probe_containment(level)["missing"]
    if path == NO_BWRAP:
        missing.pop("bwrap", None)
    if missing:
        pytest.skip(f"this machine cannot give {level} beyond bwrap: {missing}")


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_tiny=SUITE_FILE)
    write_jsonl(pytester.path / "tiny.jsonl", TINY_PROBLEMS)
    return pytester


@pytest.mark.parametrize(
    ("level", "path", "error"),
    [
        ("bwrap", NO_BWRAP, BWRAP_MISSING),
        ("landlock", NO_BWRAP, None),  # Landlock + seccomp need no bubblewrap
        ("auto", NO_BWRAP, None),  # auto takes what works
        ("basic", NO_BWRAP, None),
        ("bwrap", "usual", None),
    ],
    ids=["bwrap-no-bwrap", "landlock-no-bwrap", "auto-no-bwrap", "basic-no-bwrap", "bwrap-usual"],
)
def test_a_named_level_this_machine_cannot_give_stops_the_run_at_start_up(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, level: str, path: str, error: str | None
) -> None:
    if error is None and level in ("landlock", "bwrap"):
        _needs(level, path)
    if path == NO_BWRAP:
        monkeypatch.setenv("PATH", NO_BWRAP)
    replay = write_jsonl(
        suite.path / "replay.jsonl", replay_rows({p["id"]: ["\\boxed{70}"] for p in TINY_PROBLEMS})
    )
    # in this process: the probe is memoized per process and level (a process of its own
    # probed afresh); emptied for the run, restored after it, it probes this PATH afresh too
    monkeypatch.setattr(_probe, "_cache", {})
    result = suite.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        "--dataset-path=tiny.jsonl",
        f"--model-path=replay:{replay}",
        "--mode=text-only",
        f"--sandbox-level={level}",
    )
    output = result.stdout.str() + result.stderr.str()
    if error is None:
        assert (result.ret, "cannot give" in output) == (pytest.ExitCode.TESTS_FAILED, False), output
    else:
        assert (result.ret, f"ERROR: {error}" in result.stderr.lines, "Traceback" in output) == (
            pytest.ExitCode.USAGE_ERROR,
            True,
            False,
        ), output


CODE = {"code": "print(30 + 40)"}


def _run_retool(suite: pytest.Pytester, script: Any, out: Path, *extra: str) -> pytest.RunResult:
    """Two retool items of the tiny data on the test server playing `script`: the controller
    in this process, with the probe's per-process memo emptied for the run (restored after),
    as in a process of its own; xdist's workers are processes of their own."""
    with OpenAITestServer(ServerConfig(script=script)) as server, pytest.MonkeyPatch.context() as patch:
        patch.setattr(_probe, "_cache", {})
        return suite.runpytest_inprocess(
            "-p", "no:cacheprovider", "--dataset-path=tiny.jsonl", f"--endpoint={server.url}",
            "--mode=retool", "--limit=2", "--val-n=1", f"--agenteval-out={out}", *extra,
        )  # fmt: skip


@pytest.mark.parametrize("workers", [("-n", "0"), ("-n", "2")])
@pytest.mark.parametrize(("path", "line"), [(NO_BWRAP, DEGRADED), ("usual", None)], ids=["no-bwrap", "usual"])
def test_the_default_level_says_in_the_terminal_summary_what_it_went_without(
    suite: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    workers: tuple[str, str],
    path: str,
    line: str | None,
) -> None:
    _needs("auto", path)
    if path == NO_BWRAP:
        monkeypatch.setenv("PATH", NO_BWRAP)
    script = ScriptedToolModel(
        [
            Reply(text="Let me compute.", tool_calls=[{"name": "code_interpreter", "arguments": CODE}]),
            lambda observation, body: f"It printed {observation.strip()}, so \\boxed{{70}}.",
        ]
    )
    out = suite.path / "results.jsonl"
    result = _run_retool(suite, script, out, "--sandbox-timeout=10", *workers)
    result.assert_outcomes(passed=1, failed=1)
    (summary,) = read_results(out)[1]
    counters = {k for k in summary["backend"] if k.startswith("sandbox_")}
    shown = [" ".join(x.split()) for x in result.stdout.lines if x.strip().startswith("sandbox level")]
    assert (summary["sandbox"]["success_rate"], counters, shown) == (
        1.0,
        {"sandbox_without_bwrap"} if line else set(),
        [line] if line else [],
    ), json.dumps(summary["backend"])


def test_a_worker_on_a_machine_without_the_named_level_fails_its_items_with_the_same_line(
    suite: pytest.Pytester,
) -> None:
    """A remote worker's machine is not the controller's: `env:PATH` in its --tx spec
    makes the workers' machine one without bubblewrap, the controller's one with it."""
    _needs("bwrap", "usual")
    script = ScriptedToolModel(
        [Reply(text="Let me compute.", tool_calls=[{"name": "code_interpreter", "arguments": CODE}])]
    )
    out = suite.path / "results.jsonl"
    result = _run_retool(
        suite, script, out, "--sandbox-level=bwrap", f"--tx=2*popen//env:PATH={NO_BWRAP}", "--dist=load"
    )
    problems, _ = read_results(out)
    worker_line = "sample 0: RuntimeError: " + BWRAP_MISSING.split("; or pass")[0]
    assert (result.ret, [p["error"] for p in problems]) == (pytest.ExitCode.TESTS_FAILED, [worker_line] * 2)
