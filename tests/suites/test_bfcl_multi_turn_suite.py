"""BFCL multi-turn through pytest: every category with a scripted model on the OpenAI test
server (real sockets), with and without xdist, records with each turn's calls, results and
checks, summary groups, replay, the official export."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agenteval.tasks.bfcl._data import MULTI_TURN_CATEGORIES, find_data_dir
from pytest_agenteval.tasks.bfcl._mt_data import load_multi_turn
from pytest_agenteval.tasks.bfcl._mt_env import missing_requirements
from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests._oracle import require_oracle
from tests.bfcl.entries_guard import (
    bfcl_entries_frozen,  # noqa: F401 (parsed once, out of the collector's sight)
    bfcl_entries_untouched,  # noqa: F401 (checks the shared entries at the end)
)
from tests.bfcl.mt_script import GroundTruthModel
from tests.conftest import read_results

SUITE = """
from pytest_agenteval.tasks.bfcl.suite import Bfcl

agenteval_suite = Bfcl()


def test_bfcl(evaluation):
    evaluation.check()
"""


@pytest.fixture(scope="module", autouse=True)
def _bfcl_eval_environments() -> None:
    if missing_requirements():
        require_oracle(
            f"bfcl-eval's environments are not installed: pip install {' '.join(missing_requirements())}"
        )


WRONG = "multi_turn_miss_param_1"


@pytest.fixture(scope="module")
def selected():
    """The first two entries of each category: what `--limit-per-category=2` picks."""
    root = find_data_dir()
    return [e for c in MULTI_TURN_CATEGORIES for e in load_multi_turn(root, c)[:2]]


@pytest.fixture
def bfcl(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_bfcl=SUITE)
    return pytester


def run(pytester: pytest.Pytester, url: str, *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "--agenteval-out=r.jsonl",
        f"--endpoint={url}",
        "--model-name=mock-model",
        "-m",
        "multi_turn",
        "--limit-per-category=2",
        *args,
    )


@pytest.fixture(scope="module")
def shared_runs() -> dict:
    """The scripted runs several tests assert something of, each run once per module (and
    once per xdist worker): every run loads and collects the whole BFCL suite (~5 s of CPU)."""
    return {}


def scripted_run(
    shared_runs: dict, bfcl: pytest.Pytester, selected, small: Path, *args: str
) -> tuple[pytest.RunResult, pytest.Pytester]:
    """`run` against the GroundTruthModel on a fresh test server, shared by the tests that
    ask for the same arguments; returns the result and the folder that holds r.jsonl. Under
    xdist, the selected items (each category's first two) come from `small`, the small copy
    of the data: each worker parses and collects those, not all 10,306."""
    if args not in shared_runs:
        more = [f"--bfcl-data-dir={small}"] if "-n" in args else []
        model = GroundTruthModel(selected, wrong=[WRONG])
        with OpenAITestServer(ServerConfig(script=model)) as server:
            shared_runs[args] = run(bfcl, server.url, *args, *more), bfcl
    return shared_runs[args]


# the prompting run (under xdist) and the native run (in one process), each with an export:
# every category plays and scores, the records, replay and the official evaluation of the
# export are checked on them (two runs, each loading the BFCL suite, not three)
PROMPTING = ("-n", "2", "--bfcl-export-dir=export")
NATIVE = ("--bfcl-style=native", "--bfcl-export-dir=export")


@pytest.mark.parametrize("args", [PROMPTING, NATIVE], ids=["prompting-xdist", "native"])
def test_every_multi_turn_category_plays_and_scores(
    bfcl: pytest.Pytester, selected, shared_runs, small_bfcl_dir, args
) -> None:
    result, folder = scripted_run(shared_runs, bfcl, selected, small_bfcl_dir, *args)
    result.assert_outcomes(passed=7, failed=1)
    problems, (summary,) = read_results(folder.path / "r.jsonl")
    assert [p["problem_id"] for p in problems] == [e.id for e in selected]
    verdicts = {p["problem_id"]: p["generations"][0]["error_type"] for p in problems}
    assert verdicts == {e.id: None for e in selected} | {WRONG: "multi_turn:execution_response_mismatch"}
    assert summary["per_category"]["multi_turn_miss_param"]["accuracy"] == 0.5
    assert summary["groups"]["multi_turn"] == pytest.approx(3.5 / 4)
    assert summary["overall"] == pytest.approx(3.5 / 4)  # the only group present
    assert summary["overall_official"] == pytest.approx(30 * (3.5 / 4) / 100)
    assert all(p["markers"] == ["bfcl", p["category"], "multi_turn"] for p in problems)


def test_records_show_each_turns_calls_results_and_check(
    bfcl: pytest.Pytester, selected, shared_runs, small_bfcl_dir
) -> None:
    _, folder = scripted_run(shared_runs, bfcl, selected, small_bfcl_dir, *PROMPTING)
    problems, _ = read_results(folder.path / "r.jsonl")
    (problem,) = [p for p in problems if p["problem_id"] == "multi_turn_base_0"]
    generation = problem["generations"][0]
    first_step = generation["mt_turns"][0][0]
    assert first_step["calls"][0] == "cd(folder='document')"
    assert first_step["results"][0] == '{"current_working_directory": "document"}'
    checks = generation["turn_checks"]
    assert [c["turn"] for c in checks] == [0, 1, 2, 3] and all(c["checked"] for c in checks)
    assert checks[0]["expected_calls"][0] == "cd(folder='document')"
    assert generation["valid"] is True and generation["turns"] == 8
    (path,) = (folder.path / "export").rglob("BFCL_v4_multi_turn_base_result.json")
    assert path.parent.name == "multi_turn"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["id"] for x in lines] == [e.id for e in selected if e.category == "multi_turn_base"]
    (line,) = [x for x in lines if x["id"] == "multi_turn_base_0"]
    assert [len(turn) for turn in line["result"]] == [2, 2, 2, 2]
    assert line["result"][0][1] == "I have completed the request."


def test_replay_rescores_a_multi_turn_results_file(
    bfcl: pytest.Pytester, selected, shared_runs, small_bfcl_dir
) -> None:
    _, folder = scripted_run(shared_runs, bfcl, selected, small_bfcl_dir, *PROMPTING)
    again = bfcl.runpytest(
        "-p",
        "no:cacheprovider",
        f"--model-path=replay:{folder.path / 'r.jsonl'}",
        "--agenteval-out=again.jsonl",
        "-m",
        "multi_turn",
        "--limit-per-category=2",
    )
    again.assert_outcomes(passed=7, failed=1)
    replayed, _ = read_results(bfcl.path / "again.jsonl")
    assert {p["problem_id"]: p["generations"][0]["valid"] for p in replayed} == {
        e.id: e.id != WRONG for e in selected
    }


@pytest.mark.parametrize("style", ["prompting", "native"])
def test_the_official_evaluation_of_the_export_gives_our_scores(
    bfcl: pytest.Pytester, selected, shared_runs, small_bfcl_dir, style
) -> None:
    from pytest_agenteval.tasks.bfcl.export import export_model_name
    from tests.bfcl.official_evaluate import REQUIREMENTS, official_scores

    for module in REQUIREMENTS:
        pytest.importorskip(module)
    _, folder = scripted_run(
        shared_runs, bfcl, selected, small_bfcl_dir, *(NATIVE if style == "native" else PROMPTING)
    )
    _, (summary,) = read_results(folder.path / "r.jsonl")
    official = official_scores(
        folder.path / "export", export_model_name(style), list(MULTI_TURN_CATEGORIES), style == "native"
    )
    ours = {c: row["correct"] for c, row in summary["per_category"].items()}
    assert {c: s["correct_count"] for c, s in official["categories"].items()} == ours
    assert ours == {c: 2 for c in MULTI_TURN_CATEGORIES} | {"multi_turn_miss_param": 1}
    assert official["overall"] == pytest.approx(summary["overall_official"], abs=5e-5)  # the CSV rounds


@pytest.mark.parametrize(
    ("marker", "count", "first"),
    [
        ("multi_turn", 800, "multi_turn_base_0"),
        ("multi_turn_miss_func", 200, "multi_turn_miss_func_0"),
        ("memory", 465, "memory_kv_0-customer-0"),
        ("agentic and not memory", 200, "web_search_base_0"),
        (
            "format_sensitivity",
            5200,
            "format_sensitivity_0:ret_fmt=python&tool_call_tag=True&func_doc_fmt=python",
        ),
    ],
)
def test_markers_select_the_v4_categories(bfcl: pytest.Pytester, marker: str, count: int, first: str) -> None:
    result = bfcl.runpytest("--co", "-q", "-m", marker, "--strict-markers", "-p", "no:cacheprovider")
    ids = [line.split("[", 1)[1].rstrip("]") for line in result.stdout.lines if "::test_bfcl[" in line]
    assert len(ids) == count and ids[0].startswith(first)
