"""--batch on BFCL: a single-turn category goes through a batch and scores as a live run
does; a selection with a multi-turn category refuses --batch at start-up, naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.testing import BatchConfig
from tests.batch.conftest import ledger, metrics, run_against

pytest.importorskip("tree_sitter", reason="BFCL java/javascript decoding needs: pip install -e '.[bfcl]'")
# Imported here, outside the in-process runs: pytester drops what a run imported when it
# ends, so each run would import BFCL (its data, tree-sitter) afresh and leave the old copy
# for the garbage collector.
import pytest_agenteval.tasks.bfcl.suite  # noqa: E402, F401

SUITE = """
from pytest_agenteval.tasks.bfcl.suite import Bfcl

agenteval_suite = Bfcl()


def test_bfcl(evaluation):
    evaluation.check()
"""
# A right call for simple_python_0 (calculate_triangle_area), a wrong one for the others.
ANSWERS = {"triangle": "[calculate_triangle_area(base=10, height=5)]"}
XDIST = [pytest.param((), id="one-process"), pytest.param(("-n", "2"), id="xdist")]


def run(
    pytester: pytest.Pytester, server: Any, data: Path, *args: str, out: str
) -> tuple[pytest.RunResult, dict]:
    """The items these runs select are each file's first: every run (in this process and in
    each xdist worker) parses and collects the small copy of the BFCL data (`data`)."""
    return run_against(pytester, server, f"--bfcl-data-dir={data}", *args, cache=f"{out}-cache", out=out)


@pytest.mark.parametrize("workers", XDIST)
def test_a_single_turn_category_through_a_batch_scores_as_a_live_run(
    pytester: pytest.Pytester, agenteval_openai_server_factory, small_bfcl_dir: Path, workers
) -> None:
    pytester.makepyfile(test_bfcl=SUITE)
    selection = ("-m", "simple_python", "--limit=3")
    # the live reference in one process either way: what xdist changes is the batch run's
    # path (its workers' requests through one batch), not the live scores it is held to
    live_server = agenteval_openai_server_factory(answers=ANSWERS, answer="[no_call()]")
    live, live_summary = run(pytester, live_server, small_bfcl_dir, *selection, out="live.jsonl")
    live.assert_outcomes(passed=1, failed=2)

    server = agenteval_openai_server_factory(answers=ANSWERS, answer="[no_call()]", batch=BatchConfig())
    result, summary = run(
        pytester, server, small_bfcl_dir, "--batch", *selection, *workers, out="batch.jsonl"
    )
    result.assert_outcomes(passed=1, failed=2)
    assert server.stats()["total_requests"] == 0
    assert server.stats()["batch"]["batches_created"] == 1
    assert server.stats()["batch"]["requests_answered"] == 3
    assert metrics(summary) | {"cost": None} == metrics(live_summary) | {"cost": None}  # paid via the batch
    assert summary["cost"]["batched_generations"] == 3
    assert summary["per_category"]["simple_python"]["accuracy"] == pytest.approx(1 / 3)
    assert ledger(pytester.path / "batch.jsonl-cache") == []


@pytest.mark.parametrize("workers", XDIST)
def test_a_multi_turn_category_refuses_batch_at_start_up(
    pytester: pytest.Pytester, agenteval_openai_server_factory, small_bfcl_dir: Path, workers
) -> None:
    pytester.makepyfile(test_bfcl=SUITE)
    server = agenteval_openai_server_factory()
    selection = ("-m", "simple_python or multi_turn_base", "--limit-per-category=1", *workers)
    result, _ = run(pytester, server, small_bfcl_dir, "--batch", *selection, out="r.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --batch sends single-turn requests only, and bfcl category multi_turn_base is "
            "multi-turn: select single-turn BFCL categories (e.g. -m 'not multi_turn and not agentic'), "
            "or drop --batch"
        ]
    )
    assert server.stats()["batch"]["files_uploaded"] == 0
