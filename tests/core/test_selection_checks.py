"""Checks that need the selected suites (issue 25 items 3 and 4), made after collection and
before the first request, with and without xdist: options set for suites they have no effect
on warn, and a gate on an unselected suite, a non-numeric field or pass_at_k above N, a
baseline of another suite or N, and a missing --gaia-path are usage errors. A paired
comparison on too few problems says so instead of deciding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agenteval.config.options import build_settings, unused_options
from pytest_agenteval.output.compare import BaselineError, check_baseline, compare
from pytest_agenteval.output.gate import GateError, check_metric_name, check_pass_at_k, parse_gate
from pytest_agenteval.tasks import registry
from pytest_agenteval.tasks.registry import KNOWN_METRICS
from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import SUITE_FILE, TINY_PROBLEMS, forget_the_xdist_worker, write_jsonl
from tests.core.test_compare import records

# -- which options apply ----------------------------------------------------------------


def _settings(pytester: pytest.Pytester, *args: str):  # type: ignore[no-untyped-def]
    return build_settings(pytester.parseconfig(*args))


@pytest.mark.parametrize(
    ("args", "tags", "lines"),
    [
        (
            ("--max-tokens=100",),
            {"aime25:retool"},
            [
                "--max-tokens has no effect on the selected suites (aime25 in retool mode uses "
                "--max-assistant-tokens); it applies to aime25 in text-only mode, bfcl, datagen"
            ],
        ),
        (
            ("--max-tokens=100",),
            {"aime25:retool", "gaia"},
            [
                "--max-tokens has no effect on the selected suites (aime25 in retool mode, gaia use "
                "--max-assistant-tokens); it applies to aime25 in text-only mode, bfcl, datagen"
            ],
        ),
        (("--max-tokens=100",), {"aime25:retool", "bfcl"}, []),  # bfcl reads it
        (
            ("--max-assistant-tokens=64", "--gaia-max-steps=3"),
            {"aime25:text-only"},
            [
                "--max-assistant-tokens has no effect on the selected suites (aime25 in text-only mode "
                "uses --max-tokens); it applies to aime25 in retool mode, gaia",
                "--gaia-max-steps has no effect on the selected suites (aime25 in text-only mode); "
                "it applies to gaia",
            ],
        ),
        (
            ("--val-n=4",),
            {"datagen"},
            [
                "--val-n has no effect on the selected suites (datagen uses --datagen-solve); it applies "
                "to aime25 in retool mode, aime25 in text-only mode, bfcl, gaia"
            ],
        ),
        (("--max-tokens=100", "--gaia-max-steps=3"), {"mymath"}, []),  # a suite of one's own: any
        (("--max-tokens=100",), set(), []),  # nothing selected: nothing to say
        ((), {"aime25:retool"}, []),  # defaults never warn
    ],
)
def test_unused_options(pytester: pytest.Pytester, args: tuple[str, ...], tags: set, lines: list) -> None:
    assert unused_options(_settings(pytester, *args), tags) == lines


def test_an_ini_value_warns_as_the_flag_does(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nmax_tokens = 100\n")
    assert unused_options(_settings(pytester), {"aime25:retool"}) == [
        "--max-tokens has no effect on the selected suites (aime25 in retool mode uses "
        "--max-assistant-tokens); it applies to aime25 in text-only mode, bfcl, datagen"
    ]


def test_help_names_the_suites_of_an_option(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--help")
    text = " ".join(result.stdout.str().split())  # argparse wraps the help
    assert (
        "new tokens per assistant turn (the --max-tokens of a tool loop) (default: 1024) "
        "[only aime25 in retool mode, gaia]" in text
    )
    assert "512 unless given (default: 8192) [only aime25 in text-only mode, bfcl, datagen]" in text


# -- gates --------------------------------------------------------------------------------

MATH = "its numeric metrics: " + ", ".join(KNOWN_METRICS["aime25"])


@pytest.mark.parametrize(
    ("expression", "kind", "error"),
    [
        ("aime25.average_at_n >= 0.3", None, None),
        ("aime25.pass_at_k.4 >= 0.3", None, None),
        ("aime25.tokens.completion < 5000", None, None),
        ("aime25.tokens >= 1", None, f"'tokens' is not a number of aime25; {MATH}"),
        ("aime25.pass_at_k >= 0.3", None, f"'pass_at_k' is not a number of aime25; {MATH}"),
        ("aime25.model >= 0", None, f"aime25 has no metric 'model'; {MATH}"),
        ("mymath.tokens >= 1", "aime25", f"'tokens' is not a number of mymath; {MATH}"),
        ("mymath.tokens >= 1", None, None),  # unknown, and not derived from a built-in
        ("bfcl.per_category.simple_python.accuracy > 0.5", None, None),
        (
            "bfcl.per_category.simple_python > 0.5",
            None,
            "'per_category.simple_python' is not a number of bfcl",
        ),
        ("gaia.per_level.1.accuracy >= 0", None, None),
        # the controller's errors block is {"items": N} for every suite (gaia's was a number)
        ("gaia.errors.items <= 0", None, None),
        ("gaia.errors <= 0", None, "'errors' is not a number of gaia"),
        ("datagen.judge.mean >= 0", None, None),
        # numbers every summary has, rejected at start-up before (found in review)
        ("aime25.backend.cache_hits >= 0", None, None),
        ("bfcl.backend.gave_up_500 <= 0", None, None),
        ("aime25.sandbox.latency_ms.p95 <= 5000", None, None),
        ("aime25.duration_s <= 600", None, None),
        ("datagen.reference_problems >= 30", None, None),
    ],
)
def test_only_numeric_fields_gate(expression: str, kind: str | None, error: str | None) -> None:
    gate = parse_gate(expression)
    known = {**KNOWN_METRICS, gate.suite: KNOWN_METRICS[kind]} if kind else KNOWN_METRICS
    if error is None:
        check_metric_name(gate, known)
        return
    with pytest.raises(GateError) as info:
        check_metric_name(gate, known)
    assert str(info.value).startswith(f"--agenteval-gate {expression!r}: {error}")


def test_every_listed_metric_is_a_number_of_a_real_summary() -> None:
    """The aime25 list against a summary the plugin wrote: each template names a number."""
    from pytest_agenteval.output.gate import _matches

    numbers = {"problems", "generations", "average_at_n", "pass_at_n", "format_rate", "mean_code_calls"}
    numbers |= {"mean_turns", "correct_generations", "passed_problems", "maj_at_n", "errors.items"}
    numbers |= {"tokens.prompt", "tokens.completion", "pass_at_k.1", "sandbox.calls", "requests.retries"}
    numbers |= {"harness.controller_cpu_s"}
    for metric in numbers:
        assert any(_matches(t, metric) for t in KNOWN_METRICS["aime25"]), metric
    for metric in ("tokens", "ci95.average_at_n", "model", "config.seed", "pass_at_k"):
        assert not any(_matches(t, metric) for t in KNOWN_METRICS["aime25"]), metric


SUBCLASSES = """
from pytest_agenteval.tasks.aime25 import Aime25


class Plain(Aime25):
    name = "plain"


class Extended(Aime25):
    name = "extended"

    def summarize(self, records, settings):
        return {**super().summarize(records, settings), "my_score": 1.0}
"""


def test_a_subclass_keeps_its_built_in_fields_unless_it_summarizes_itself(pytester: pytest.Pytester) -> None:
    from pytest_agenteval.tasks.registry import numeric_metrics

    module = pytester.makepyfile(subclasses=SUBCLASSES)
    namespace: dict = {}
    exec(compile(module.read_text(), str(module), "exec"), namespace)
    assert numeric_metrics(namespace["Plain"]()) == KNOWN_METRICS["aime25"]
    assert numeric_metrics(namespace["Extended"]()) is None  # its own fields: not checked


@pytest.mark.parametrize(
    ("expression", "n", "error"),
    [
        ("aime25.pass_at_k.2 >= 0.5", 2, None),
        ("aime25.pass_at_k.1 >= 0.5", 1, None),
        (
            "aime25.pass_at_k.4 >= 0.5",
            2,
            "k=4 but aime25 runs N=2 generations per problem; use a k within 1-2, or raise --val-n to "
            "at least 4",
        ),
        (
            "aime25.pass_at_k.0 >= 0.5",
            2,
            "k starts at 1; use a k within 1-2",
        ),
        ("aime25.average_at_n >= 0.5", 1, None),
    ],
)
def test_pass_at_k_above_n(expression: str, n: int, error: str | None) -> None:
    if error is None:
        check_pass_at_k(parse_gate(expression), n)
        return
    with pytest.raises(GateError) as info:
        check_pass_at_k(parse_gate(expression), n)
    assert str(info.value) == f"--agenteval-gate {expression!r}: {error}"


# -- the paired comparison ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shared", "verdict", "passed", "reason_end"),
    [
        (
            2,
            "UNDECIDED",
            True,
            "on 2 shared problems, diff -1.0000: too few problems to decide (2 paired; need >= 10)",
        ),
        (
            9,
            "UNDECIDED",
            True,
            "on 9 shared problems, diff -1.0000: too few problems to decide (9 paired; need >= 10)",
        ),
        (10, "FAIL", False, "[-1.0000, -1.0000], tolerance 0: significant drop"),
    ],
)
def test_too_few_problems_to_decide(shared: int, verdict: str, passed: bool, reason_end: str) -> None:
    baseline = {"aime25": {str(i): 1.0 for i in range(shared)}}
    result = compare("aime25", records({str(i): 0.0 for i in range(shared)}), baseline, tolerance=0.0)
    assert (result.verdict, result.passed, result.decided) == (verdict, passed, verdict != "UNDECIDED")
    assert result.reason.endswith(reason_end), result.reason


# -- the baseline -------------------------------------------------------------------------


def _baseline(path: Path, suite: str = "aime25", n: int = 1) -> Path:
    rows = [
        {"type": "problem", "suite": suite, "problem_id": p["id"], "val_n": n, "complete": True,
         "pass_at_n": True, "generations": [{"correct": True}] * n}
        for p in TINY_PROBLEMS
    ]  # fmt: skip
    rows.append({"type": "summary", "suite": suite, "val_n": n, "dataset": "tiny"})
    return write_jsonl(path, rows)


@pytest.mark.parametrize(
    ("suite", "n", "samples", "error"),
    [
        ("aime25", 2, {"aime25": 2}, None),
        (
            "aime25",
            4,
            {"aime25": 2},
            "not comparable: aime25 N differs: this run has N=2, the baseline has N=4; pass --val-n 4 "
            "or give a baseline with N=2",
        ),
        (
            "bfcl",
            1,
            {"aime25": 1},
            "not comparable: it has no aime25 results (it has bfcl); give a baseline of the suites this "
            "run selects",
        ),
    ],
)
def test_check_baseline(tmp_path: Path, suite: str, n: int, samples: dict, error: str | None) -> None:
    from pytest_agenteval.output.compare import load_baseline

    path = _baseline(tmp_path / "base.jsonl", suite, n)
    if error is None:
        check_baseline(path, load_baseline(path), samples)
        return
    with pytest.raises(BaselineError) as info:
        check_baseline(path, load_baseline(path), samples)
    assert str(info.value) == f"--agenteval-compare {path}: {error}"


# -- whole runs, with and without xdist -----------------------------------------------------

SOLVED = {"What is 30 + 40?": "\\boxed{70}", "What is 12 * 49?": "\\boxed{588}"}


def _run(pytester: pytest.Pytester, server: OpenAITestServer, workers: str, *args: str) -> pytest.RunResult:
    data = write_jsonl(pytester.path / "tiny.jsonl", TINY_PROBLEMS[:2])
    return pytester.runpytest_inprocess(  # xdist's workers are processes of their own anyway
        "-p", "no:cacheprovider", f"--dataset-path={data}", f"--endpoint={server.url}",
        "--agenteval-out=results.jsonl", "-n", workers, *args,
    )  # fmt: skip


@pytest.fixture
def suite_dir(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    forget_the_xdist_worker(monkeypatch)  # when this test runs in an xdist worker itself
    monkeypatch.setattr(registry, "_instances", {})  # the runs are in this process: no earlier run's suites
    pytester.makepyfile(test_tiny=SUITE_FILE)
    return pytester


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("--agenteval-gate", "aime.average_at_n >= 0.3"),
            "ERROR: --agenteval-gate 'aime.average_at_n >= 0.3': suite aime is not selected in this run "
            "(selected: aime25); gate one of those, or select aime's tests",
        ),
        (
            ("--agenteval-gate", "aime25.tokens >= 1"),
            f"ERROR: --agenteval-gate 'aime25.tokens >= 1': 'tokens' is not a number of aime25; {MATH}",
        ),
        (
            ("--val-n=2", "--agenteval-gate", "aime25.pass_at_k.4 >= 0.5"),
            "ERROR: --agenteval-gate 'aime25.pass_at_k.4 >= 0.5': k=4 but aime25 runs N=2 generations per "
            "problem; use a k within 1-2, or raise --val-n to at least 4",
        ),
        (
            ("--val-n=2", "--agenteval-compare=base.jsonl"),
            "ERROR: --agenteval-compare base.jsonl: not comparable: aime25 N differs: this run has N=2, the "
            "baseline has N=1; pass --val-n 1 or give a baseline with N=2",
        ),
        (
            ("--agenteval-compare=other.jsonl",),
            "ERROR: --agenteval-compare other.jsonl: not comparable: it has no aime25 results (it has bfcl); "
            "give a baseline of the suites this run selects",
        ),
        # a missing --gaia-path stops runs that select GAIA: tests/suites/test_gaia_suite.py
    ],
)
def test_a_mistake_stops_the_run_before_the_first_request(
    suite_dir: pytest.Pytester, workers: str, args: tuple[str, ...], message: str
) -> None:
    _baseline(suite_dir.path / "base.jsonl")
    _baseline(suite_dir.path / "other.jsonl", suite="bfcl")
    with OpenAITestServer(ServerConfig(answers=SOLVED)) as server:
        result = _run(suite_dir, server, workers, "--mode=text-only", *args)
        sent = len(server.requests)
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output[-3000:]
    assert message in result.errlines, output[-3000:]
    assert "Traceback" not in output
    assert sent == 0
    assert not (suite_dir.path / "results.jsonl").exists()


@pytest.mark.parametrize("workers", ["0", "2"])
def test_an_option_without_effect_warns_at_start_up(suite_dir: pytest.Pytester, workers: str) -> None:
    with OpenAITestServer(ServerConfig(answers=SOLVED)) as server:
        result = _run(suite_dir, server, workers, "--mode=retool", "--val-n=1", "--max-tokens=256")
    lines = result.outlines
    warning = (
        "WARNING: agenteval: --max-tokens has no effect on the selected suites (aime25 in retool mode uses "
        "--max-assistant-tokens); it applies to aime25 in text-only mode, bfcl, datagen"
    )
    assert lines.count(warning) == 1, result.stdout.str()[-3000:]
    summary = next(i for i, line in enumerate(lines) if "== agenteval ==" in line)
    assert lines.index(warning) < summary  # at start-up, not with the results
    assert result.ret == 0


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_missing_gaia_path_only_warns_where_gaia_is_not_selected(
    suite_dir: pytest.Pytester, workers: str
) -> None:
    """A gaia_path in a shared ini must not stop AIME runs (it was exit 4 on every run)."""
    with OpenAITestServer(ServerConfig(answers=SOLVED)) as server:
        result = _run(suite_dir, server, workers, "--mode=text-only", "--val-n=1", "--gaia-path=/nonexistent")
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert [line for line in result.outlines if line.startswith("WARNING: agenteval: --gaia-path")] == [
        "WARNING: agenteval: --gaia-path has no effect on the selected suites (aime25 in text-only mode); "
        "it applies to gaia"
    ]


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_gate_on_a_suite_when_nothing_is_selected_still_fails_at_the_end(
    suite_dir: pytest.Pytester, workers: str
) -> None:
    """docs/ci.md: nothing ran (-k selects none) with a gate is 1, not a usage error."""
    with OpenAITestServer(ServerConfig(answers=SOLVED)) as server:
        result = _run(suite_dir, server, workers, "--mode=text-only", "-k", "none", "--agenteval-gate",
                      "aime25.average_at_n >= 0.5")  # fmt: skip
    assert result.ret == 1, result.stdout.str()[-3000:]


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_comparison_on_too_few_problems_says_so(suite_dir: pytest.Pytester, workers: str) -> None:
    base = suite_dir.path / "base.jsonl"
    rows = [
        {"type": "problem", "suite": "aime25", "problem_id": p["id"], "val_n": 1, "complete": True,
         "generations": [{"correct": True}]}
        for p in TINY_PROBLEMS[:2]
    ]  # fmt: skip
    write_jsonl(base, [*rows, {"type": "summary", "suite": "aime25", "val_n": 1}])
    wrong = {"What is 30 + 40?": "\\boxed{1}", "What is 12 * 49?": "\\boxed{1}"}
    with OpenAITestServer(ServerConfig(answers=wrong)) as server:
        result = _run(
            suite_dir, server, workers, "--mode=text-only", "--val-n=1", f"--agenteval-compare={base}"
        )
    result.stdout.fnmatch_lines(
        [
            "compare UNDECIDED  aime25.average_at_n  (0.0000 vs 1.0000 on 2 shared problems, diff -1.0000: "
            "too few problems to decide (2 paired; need >= 10))"
        ]
    )
    assert result.ret == 1  # two unsolved items, and no verdict to forgive them
    summary = [json.loads(line) for line in (suite_dir.path / "results.jsonl").read_text().splitlines()][-1]
    assert (summary["compare"]["decided"], summary["compare"]["passed"]) == (False, True)
