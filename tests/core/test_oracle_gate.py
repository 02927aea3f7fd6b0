"""Oracle tests cannot vanish in CI (tests/_oracle.py): a missing oracle skips with its
reason on a developer's machine and fails with the same reason under AGENTEVAL_CI=1,
which .ci/run exports."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CI_NOTE = "(AGENTEVAL_CI=1: an oracle test may not skip)"
QUIET_INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"  # no pytest-asyncio warning

TINY = """
import pytest

from tests._oracle import require_oracle


@pytest.fixture(scope="module", autouse={module_gate})
def _gate():
    require_oracle("the module's oracle is missing: pip install module-oracle")


def test_needs_oracle():
    require_oracle("the oracle is not installed: pip install oracle")


def test_without_oracle():
    assert 1 + 1 == 2
"""

# (AGENTEVAL_CI, outcomes, the line that says why: the short summary's, the failure's)
IN_A_TEST = [
    (
        None,
        {"passed": 1, "skipped": 1},
        "SKIPPED [1] test_tiny.py:12: the oracle is not installed: pip install oracle",
    ),
    (
        "0",
        {"passed": 1, "skipped": 1},
        "SKIPPED [1] test_tiny.py:12: the oracle is not installed: pip install oracle",
    ),
    (
        "1",
        {"passed": 1, "failed": 1},
        f"the oracle is not installed: pip install oracle {CI_NOTE}",
    ),
]


@pytest.mark.parametrize(("ci", "outcomes", "line"), IN_A_TEST)
def test_a_missing_oracle_skips_and_fails_in_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str | None, outcomes: dict, line: str
) -> None:
    pytester.syspathinsert(REPO)  # `tests._oracle` as the suite imports it
    pytester.makeini(QUIET_INI)
    pytester.makepyfile(test_tiny=TINY.format(module_gate=False))
    if ci is None:
        monkeypatch.delenv("AGENTEVAL_CI", raising=False)
    else:
        monkeypatch.setenv("AGENTEVAL_CI", ci)
    result = pytester.runpytest("-rsf", "-p", "no:cacheprovider")
    result.assert_outcomes(**outcomes)
    assert line in result.outlines


@pytest.mark.parametrize(("ci", "outcomes"), [(None, {"skipped": 2}), ("1", {"errors": 2})])
def test_a_module_gate_skips_every_test_and_errors_every_test_in_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str | None, outcomes: dict
) -> None:
    pytester.syspathinsert(REPO)
    pytester.makeini(QUIET_INI)
    pytester.makepyfile(test_tiny=TINY.format(module_gate=True))
    if ci is None:
        monkeypatch.delenv("AGENTEVAL_CI", raising=False)
    else:
        monkeypatch.setenv("AGENTEVAL_CI", ci)
    result = pytester.runpytest("-rsE", "-p", "no:cacheprovider")
    result.assert_outcomes(**outcomes)
    reason = "the module's oracle is missing: pip install module-oracle"
    if ci is None:  # a skip in a fixture is reported at each test's line
        assert [line for line in result.outlines if line.startswith("SKIPPED")] == [
            f"SKIPPED [1] test_tiny.py:11: {reason}",
            f"SKIPPED [1] test_tiny.py:15: {reason}",
        ]
    else:
        assert result.outlines.count(f"{reason} {CI_NOTE}") == 2


@pytest.mark.parametrize(("ci", "outcomes"), [(None, {"skipped": 2}), ("1", {"failed": 2})])
def test_the_lab_parity_tests_fail_in_ci_without_the_lab(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str | None, outcomes: dict
) -> None:
    """The real guard of tests/aime25: the seed lab's folder is not there."""
    missing = pytester.path / "no-lab"
    monkeypatch.setenv("AGENTEVAL_LAB_DIR", str(missing))
    if ci is None:
        monkeypatch.delenv("AGENTEVAL_CI", raising=False)
    else:
        monkeypatch.setenv("AGENTEVAL_CI", ci)
    result = pytester.runpytest_subprocess(
        str(REPO / "tests" / "aime25" / "test_lab_parity.py"),
        "-k",
        "protocol_constants or parser_gives",
        "-rsf",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
    )
    result.assert_outcomes(**outcomes)
    reason = (
        f"the seed lab's code is not at {missing} (shared/ beside the checkout, or set AGENTEVAL_LAB_DIR)"
    )
    if ci is None:
        assert sum(line.startswith("SKIPPED [2] ") and line.endswith(reason) for line in result.outlines) == 1
    else:
        assert result.outlines.count(f"{reason} {CI_NOTE}") == 2
