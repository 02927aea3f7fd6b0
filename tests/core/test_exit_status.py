"""The exit status table of docs/ci.md#exit-status, one row per kind of failure, each run
without a gate, with a gate that holds and (where the verdict could matter) with one that
fails, with and without xdist. A gate forgives only unsolved evaluation items."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_agenteval.tasks import registry
from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import TINY_PROBLEMS, forget_the_xdist_worker, write_jsonl

# problem 0 (30 + 40) is always solved; problem 1 (12 * 49) too when the row says so
SOLVED = {"What is 30 + 40?": "\\boxed{70}", "What is 12 * 49?": "\\boxed{588}"}
HALF = {"What is 30 + 40?": "\\boxed{70}", "What is 12 * 49?": "\\boxed{1}"}

SUITE = """
import os

from pytest_agenteval.models import FatalRequestError
from pytest_agenteval.tasks.aime25 import Aime25
{prelude}

class MyMath(Aime25):
    name = "mymath"

    async def rollout(self, ctx):
        if ctx.problem.index == 1 and {fault} is not None:
            raise {fault}
        return await super().rollout(ctx)


agenteval_suite = MyMath()


def test_mymath(evaluation):
    evaluation.check(){body}
"""

GATES = {
    "none": (),
    "holds": ("--agenteval-gate", "mymath.average_at_n >= 0.5"),
    "fails": ("--agenteval-gate", "mymath.average_at_n > 1"),
}


@dataclass(frozen=True)
class Row:
    """One row of the table: what failed, and the exit status with no gate, a gate that
    holds and one that fails, without xdist (n0) and with -n 2 (n2); None: no such row."""

    failed: str  # as docs/ci.md's table says it
    n0: tuple[int, int, int] | None
    n2: tuple[int, int, int]
    gates: tuple[str, ...] = ("holds",)  # the columns run: the others take the same path
    answers: dict[str, str] = field(default_factory=lambda: HALF)
    files: dict[str, str] = field(default_factory=dict)
    data: dict[str, str] = field(default_factory=dict)  # other files, by their whole name
    args: tuple[str, ...] = ()
    fault: str = "None"  # what the suite's rollout raises for problem 1
    body: str = ""  # more test body after evaluation.check()
    prelude: str = ""  # module code before the suite
    line: str | None = None  # the agenteval line that says why, with a gate that holds
    own_process: bool = False  # a KeyboardInterrupt in process would stop this test run too


FORGIVE_ONLY = "failed otherwise (gates forgive only unsolved problems): "
INFRA = "infrastructure errors in 1 item(s): gates fail closed"
SETUP_ERROR = """import pytest


@pytest.fixture
def broken():
    raise RuntimeError("no database")


def test_uses_it(broken):
    pass
"""
TEARDOWN_ERROR = """import pytest


@pytest.fixture(autouse=True)
def cleanup(request):
    yield
    if request.node.name == "test_mymath[0]":
        raise RuntimeError("cleanup failed")
"""
BROKEN_PLUGIN = """import os


def pytest_runtest_logreport(report):
    if report.when == "call" and not os.environ.get("PYTEST_XDIST_WORKER"):
        raise RuntimeError("a broken plugin")
"""
ALL = tuple(GATES)
BASELINE = "".join(
    json.dumps(line) + "\n"
    for line in [
        *(
            {"type": "problem", "suite": "mymath", "problem_id": i, "generations": [{"correct": True}]}
            for i in (0, 1)
        ),
        {"type": "summary", "suite": "mymath", "val_n": 1},
    ]
)
ROWS = {
    "nothing": Row("nothing", (0, 0, 1), (0, 0, 1), ALL, answers=SOLVED),
    "unsolved-only": Row(
        "only unsolved problems",
        (1, 0, 1),
        (1, 0, 1),
        ALL,
        line="gate PASS  mymath.average_at_n >= 0.5  (0.5000 >= 0.5 holds, a point comparison)",
    ),
    "ordinary-test": Row(
        "an ordinary test",
        (1, 1, 1),
        (1, 1, 1),
        files={"test_plain": "def test_real_bug():\n    assert 1 + 1 == 3\n"},
        line=FORGIVE_ONLY + "test_plain.py::test_real_bug (call)",
    ),
    "agenteval-body": Row(
        "an agenteval test body, by its own assert",
        (1, 1, 1),
        (1, 1, 1),
        body="\n    assert evaluation.record.num_correct > 1, 'my own check'",
        line=FORGIVE_ONLY + "test_mymath.py::test_mymath[0] (call)",
    ),
    "generation-error": Row(
        "an agenteval item's generations (an exception in the rollout)",
        (1, 1, 1),
        (1, 1, 1),
        fault="ZeroDivisionError('division by zero')",
        line=INFRA,
    ),
    "refused-request": Row(
        "a request the server refused (401)",
        (1, 1, 1),
        (1, 1, 1),
        ("none", "holds"),
        fault="FatalRequestError('http://x/v1/chat/completions: HTTP 401: bad key')",
    ),
    "setup-error": Row(
        "an ordinary test's setup", (1, 1, 1), (1, 1, 1), files={"test_plain": SETUP_ERROR}, line=INFRA
    ),
    "teardown-error": Row(
        "an agenteval item's teardown", (1, 1, 1), (1, 1, 1), files={"conftest": TEARDOWN_ERROR}, line=INFRA
    ),
    # Without xdist, os._exit ends pytest itself, with os._exit's status: no row there.
    "worker-crash": Row(
        "an xdist worker crashed (in an ordinary test)",
        None,
        (1, 1, 1),
        files={"test_plain": "import os\n\n\ndef test_crash():\n    os._exit(1)\n"},
        line=INFRA,
    ),
    # pytest stops at a collection error; xdist reports it and runs the rest
    "collection-error": Row("collection", (2, 2, 2), (1, 1, 1), files={"test_broken": "1 / 0\n"}),
    "collection-error-continue": Row(
        "collection, with --continue-on-collection-errors",
        (1, 1, 1),
        (1, 1, 1),
        files={"test_broken": "1 / 0\n"},
        args=("--continue-on-collection-errors",),
        line=FORGIVE_ONLY + "test_broken.py (collection)",
    ),
    # without xdist the module raises at collection; with it, on the controller only
    "suite-import-on-controller": Row(
        "the suite module's import, on the xdist controller only",
        (2, 2, 2),
        (1, 1, 1),
        ("none", "holds"),
        prelude='if "PYTEST_XDIST_WORKER" not in os.environ:\n    1 / 0',
    ),
    "interrupted": Row(
        "interrupted (Ctrl-C, KeyboardInterrupt)",
        (2, 2, 2),
        (2, 2, 2),
        files={"test_plain": "def test_stop():\n    raise KeyboardInterrupt\n"},
        own_process=True,
    ),
    "internal-error": Row(
        "pytest itself (INTERNALERROR: a plugin raised)",
        (3, 3, 3),
        (3, 3, 3),
        files={"conftest": BROKEN_PLUGIN},
    ),
    "usage-error": Row(
        "usage (a bad option or gate)", (4, 4, 4), (4, 4, 4), args=("--agenteval-progress=sometimes",)
    ),
    # every request refused before it is sent (its worst case is over the budget): errors, not unsolved
    "budget-stopped": Row(
        "the budget stopped items (--max-cost, --max-total-tokens)",
        (1, 1, 1),
        (1, 1, 1),
        ("none", "holds"),
        args=("--max-total-tokens=1",),
    ),
    # a sample of the selection run and projected: no verdict, whatever the answers and gates
    "estimate": Row(
        "--estimate (a sample run, the rest projected)", (0, 0, 0), (0, 0, 0), ALL, args=("--estimate",)
    ),
    # the sample is problem 1 alone, and its rollout raises: nothing to project from
    "estimate-unprojected": Row(
        "--estimate, every sample item of a suite errored (nothing projected)",
        (1, 1, 1),
        (1, 1, 1),
        ("none", "fails"),
        args=("--estimate", "--estimate-sample=1"),
        fault='RuntimeError("the rollout broke")',
    ),
    "no-tests": Row(
        "nothing ran (-k selects none)", (5, 1, 1), (5, 1, 1), ("none", "holds"), args=("-k", "none")
    ),
    # 2 shared problems with a baseline where both were solved; no gate: the comparison alone
    "compare-undecided": Row(
        "nothing; the baseline comparison cannot decide (fewer than 10 shared problems)",
        (0, 0, 1),
        (0, 0, 1),
        ALL,
        answers=SOLVED,
        data={"baseline.jsonl": BASELINE},
        args=("--agenteval-compare=baseline.jsonl",),
        line="compare UNDECIDED  mymath.average_at_n  (1.0000 vs 1.0000 on 2 shared problems, diff +0.0000: "
        "too few problems to decide (2 paired; need >= 10))",
    ),
    # a gate with a confidence whose interval holds its threshold (2 draws: [0.0397, 1] around
    # 1.0) is UNDECIDED, and CI must not go green on it, whatever the other gates say
    "gate-undecided": Row(
        "nothing; a gate with a confidence is undecided (its interval holds the threshold)",
        (1, 1, 1),
        (1, 1, 1),
        ALL,
        answers=SOLVED,
        args=("--agenteval-gate", "mymath.average_at_n >= 0.5 @ 0.95"),
        line="gate UNDECIDED  mymath.average_at_n >= 0.5 @ 0.95  (1.0000, 95% interval [0.0397, 1.0000] "
        "over 2 draws (Hoeffding); holds 0.5: undecided, the data cannot tell)",
    ),
    # the same with one problem unsolved: no verdict forgives it (before, it was xfailed: exit 0)
    "unsolved-compare-undecided": Row(
        "only unsolved problems; the baseline comparison cannot decide",
        (1, 0, 1),
        (1, 0, 1),
        ("none",),
        data={"baseline.jsonl": BASELINE},
        args=("--agenteval-compare=baseline.jsonl",),
    ),
}


def _cases() -> list[object]:
    cases = []
    for name, row in ROWS.items():
        for workers, exits in (("0", row.n0), ("2", row.n2)):
            for gate in row.gates if exits is not None else ():
                status = exits[list(GATES).index(gate)]  # type: ignore[index]
                cases.append(pytest.param(name, workers, gate, status, id=f"{name}-n{workers}-gate-{gate}"))
    return cases


@pytest.mark.parametrize(("name", "workers", "gate", "status"), _cases())
def test_exit_status(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    workers: str,
    gate: str,
    status: int,
) -> None:
    row = ROWS[name]
    forget_the_xdist_worker(monkeypatch)  # when this test runs in an xdist worker itself
    # the run is in this process: the suites an earlier run collected here are not this one's
    # (a remembered `mymath` would hide that the controller cannot import the suite module)
    monkeypatch.setattr(registry, "_instances", {})
    pytester.makepyfile(
        test_mymath=SUITE.format(prelude=row.prelude, fault=row.fault, body=row.body),
        **{f: text for f, text in row.files.items() if f != "conftest"},
    )
    for name, text in row.data.items():
        (pytester.path / name).write_text(text, encoding="utf-8")
    if "conftest" in row.files:
        pytester.makeconftest(row.files["conftest"])
    data = write_jsonl(pytester.path / "tiny.jsonl", TINY_PROBLEMS[:2])
    with OpenAITestServer(ServerConfig(answers=row.answers)) as server:
        # in this process (xdist's workers are processes of their own anyway): every row's
        # state is the run's own, and pytester restores sys.modules and the environment after
        run = pytester.runpytest_subprocess if row.own_process else pytester.runpytest_inprocess
        result = run(
            "-p", "no:cacheprovider", f"--dataset-path={data}", f"--endpoint={server.url}",
            "--mode=text-only", "--val-n=1", "--agenteval-out=results.jsonl", "-n", workers,
            *row.args, *GATES[gate],
        )  # fmt: skip
    assert result.ret == status, result.stdout.str()[-3000:]
    if row.line is not None and gate == "holds":
        assert row.line in result.outlines


def _documented() -> dict[str, tuple[tuple[int, ...], tuple[int, ...]]]:
    """docs/ci.md's exit status table: what failed -> (statuses without xdist, with -n);
    a cell reads `2` or `2, -n: 1`."""
    text = (Path(__file__).parents[2] / "docs" / "ci.md").read_text(encoding="utf-8")
    section = text.split("## Exit status", 1)[1].split("\n## ", 1)[0]
    table: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {}
    for line in section.splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[1][:1].isdigit():
            continue
        plain = tuple(int(c.split(",")[0]) for c in cells[1:])
        xdist = tuple(int(c.split("-n`:")[1]) if "-n`:" in c else int(c.split(",")[0]) for c in cells[1:])
        table[cells[0].replace("`", "")] = (plain, xdist)
    return table


# Rows tested elsewhere: test_storage_faults.py's full disk under the results file
ELSEWHERE = {"the results file could not be written where asked (a full disk)": ((1, 1, 1), (1, 1, 1))}


def test_the_docs_table_is_the_tested_one() -> None:
    expected = {row.failed: (row.n0 or row.n2, row.n2) for row in ROWS.values()} | ELSEWHERE
    assert _documented() == expected
