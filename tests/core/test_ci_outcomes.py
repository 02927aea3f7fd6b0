"""The terminal, JUnit and the exit status agree (issue 25 item 7): with a gate, an unsolved
problem is xfailed (`x`, JUnit `<skipped type="pytest.xfail">`) and each gate is a JUnit
testcase that fails when the gate does; without one it is a plain failure. Read back by
a real JUnit consumer (junitparser), with and without xdist, and checked against
docs/ci.md's table."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agenteval.tasks import registry
from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import SUITE_FILE, TINY_PROBLEMS, forget_the_xdist_worker, write_jsonl

# problem 0 solved, problem 1 unsolved
HALF = {"What is 30 + 40?": "\\boxed{70}", "What is 12 * 49?": "\\boxed{1}"}
GATES = {
    "none": (),
    "holds": ("--agenteval-gate", "aime25.average_at_n >= 0.5"),
    "fails": ("--agenteval-gate", "aime25.average_at_n > 0.5"),
}


@pytest.fixture(scope="module")
def xunit2():
    return pytest.importorskip(
        "junitparser.xunit2", reason="pip install junitparser (the report-tests extra)"
    )


# gate -> (pytest's outcomes, JUnit (tests, failures, skipped), the unsolved item's JUnit
# result, the gate testcase's JUnit result, exit status)
EXPECTED = {
    "none": ({"passed": 1, "failed": 1}, (2, 1, 0), "failure", None, 1),
    "holds": ({"passed": 1, "xfailed": 1}, (3, 0, 1), "skipped pytest.xfail", "passed", 0),
    "fails": ({"passed": 1, "xfailed": 1}, (3, 1, 1), "skipped pytest.xfail", "failure", 1),
}


def _result(case) -> str:
    (found,) = case.result or [None]
    if found is None:
        return "passed"
    kind = type(found).__name__.lower()
    return f"{kind} {found.type}" if kind == "skipped" else kind


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.parametrize("gate", list(GATES))
def test_junit_the_terminal_and_the_exit_status_agree(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, xunit2, gate: str, workers: str
) -> None:
    forget_the_xdist_worker(monkeypatch)  # when this test runs in an xdist worker itself
    monkeypatch.setattr(registry, "_instances", {})  # the run is in this process: no earlier run's suites
    pytester.makepyfile(test_tiny=SUITE_FILE)
    data = write_jsonl(pytester.path / "tiny.jsonl", TINY_PROBLEMS[:2])
    junit = pytester.path / "junit.xml"
    with OpenAITestServer(ServerConfig(answers=HALF)) as server:
        result = pytester.runpytest_inprocess(
            "-p", "no:cacheprovider", f"--dataset-path={data}", f"--endpoint={server.url}",
            "--mode=text-only", "--val-n=1", "--agenteval-out=results.jsonl", "-n", workers,
            f"--junitxml={junit}", "-rx", *GATES[gate],
        )  # fmt: skip
    outcomes, counts, unsolved, verdict, status = EXPECTED[gate]
    assert (result.parseoutcomes() | {"seconds": 0}) == outcomes | {"seconds": 0}
    assert result.ret == status
    (suite,) = xunit2.JUnitXml.fromfile(str(junit))
    assert (suite.tests, suite.failures, suite.skipped, suite.errors) == (*counts, 0)
    cases = {case.name: case for case in suite}
    assert _result(cases["test_aime25[0]"]) == "passed"
    assert _result(cases["test_aime25[1]"]) == unsolved
    gates = [case for case in suite if case.classname == "agenteval.gate"]
    assert [_result(case) for case in gates] == ([] if verdict is None else [verdict])
    numbers = {p.name: p.value for p in cases["test_aime25[1]"].properties()}
    assert (numbers["agenteval.num_correct"], numbers["agenteval.pass_at_n"]) == ("0", "false")
    if gate != "none":
        (skipped,) = cases["test_aime25[1]"].result
        assert (
            skipped.message == "unsolved, a gate decides the run: 0/1 correct; expected '588', answers ['1']"
        )
        assert f"XFAIL test_tiny.py::test_aime25[1] - {skipped.message}" in result.outlines


def _documented() -> dict[str, tuple[str, str, str]]:
    """docs/ci.md's table of how an unsolved problem reads: run -> (pytest, terminal, JUnit)."""
    text = (Path(__file__).parents[2] / "docs" / "ci.md").read_text(encoding="utf-8")
    section = text.split("## How an unsolved problem reads", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] in ("no gate", "a gate that holds", "a gate that fails"):
            rows[cells[0]] = (cells[1], cells[2], cells[3])
    return rows


def test_the_docs_table_is_the_tested_one() -> None:
    names = {"none": "no gate", "holds": "a gate that holds", "fails": "a gate that fails"}
    tested = {
        names[gate]: (
            "failed" if "failed" in outcomes else "xfailed",
            "F" if "failed" in outcomes else "x",
            "<failure>" if unsolved == "failure" else '<skipped type="pytest.xfail">',
        )
        for gate, (outcomes, _, unsolved, _, _) in EXPECTED.items()
    }
    assert _documented() == tested
