"""--estimate's exit status (docs/ci.md): 0 only with a projection of every suite's
selection, 1 when a suite's sample items all errored (nothing could be projected), as a
run whose items errored exits 1. Wrong answers still exit 0: a projection, not a verdict."""

from __future__ import annotations

import json

import pytest

from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from pytest_agenteval.testing._faults import FaultContext
from tests.conftest import write_jsonl

PROBLEMS = [{"id": i, "problem": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(6)]


def fail_items(*items: int):
    """A fault plan: every attempt of the listed items' prompts gets a 500."""

    def plan(context: FaultContext) -> str | None:
        text = json.dumps(context.body["messages"])
        return "500" if any(f"What is {i} + {i}?" in text for i in items) else None

    return plan


@pytest.mark.parametrize(
    ("failing", "exit_code", "line"),
    [
        (
            (),
            pytest.ExitCode.OK,
            "estimate aime25: * prompt + * completion tokens, *, for all 6 selected items (the mean of 2 *",
        ),
        (
            (1,),  # the sample is items 1 and 4: one errored, the other projects the selection
            pytest.ExitCode.OK,
            "estimate aime25: * for all 6 selected items (the mean of 1 sample items, *",
        ),
        (
            (1, 4),
            pytest.ExitCode.TESTS_FAILED,
            "estimate aime25: none of the 2 sample items finished: 6 items not projected",
        ),
    ],
    ids=["all-finished", "one-errored", "all-errored"],
)
@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["no-xdist", "xdist"])
def test_estimate_exits_1_when_nothing_could_be_projected(
    run_suite,
    pytester: pytest.Pytester,
    failing: tuple[int, ...],
    exit_code: pytest.ExitCode,
    line: str,
    workers: tuple[str, ...],
) -> None:
    data = write_jsonl(pytester.path / "six.jsonl", PROBLEMS)
    config = ServerConfig(fault_plan=fail_items(*failing))
    with OpenAITestServer(config) as server:
        result, _ = run_suite(
            f"--endpoint={server.url}",
            "--estimate",
            "--estimate-sample=2",
            "--val-n=1",
            "--max-tokens=16",
            "--max-attempts=1",
            *workers,
            data=data,
        )
    assert result.ret == exit_code, result.stdout.str()
    result.stdout.fnmatch_lines([line])
