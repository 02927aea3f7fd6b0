"""The BFCL suite through pytest: selection by marker, per-category results, replay,
export of the official result files, progressive mode, the embedded model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agenteval.tasks.bfcl import load_bfcl, score_text
from tests.bfcl.entries_guard import (
    bfcl_entries_frozen,  # noqa: F401 (parsed once, out of the collector's sight)
    bfcl_entries_untouched,  # noqa: F401 (checks the shared entries at the end)
)
from tests.conftest import read_results, write_jsonl

SUITE = """
from pytest_agenteval.tasks.bfcl.suite import Bfcl

agenteval_suite = Bfcl()


def test_bfcl(evaluation):
    evaluation.check()
"""
pytest.importorskip("tree_sitter", reason="BFCL java/javascript decoding needs: pip install -e '.[bfcl]'")


def oracle_text(entry) -> str:
    """A correct call: every parameter with an allowed value other than "" gets the first."""
    calls = []
    for call in entry.ground_truth:
        ((name, params),) = call.items()
        chosen = {k: next((x for x in v if x != ""), None) for k, v in params.items()}
        arguments = ", ".join(f"{k}={v!r}" for k, v in chosen.items() if v is not None)
        calls.append(f"{name}({arguments})")
    return "[" + ", ".join(calls) + "]"


@pytest.fixture
def bfcl(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_bfcl=SUITE)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "--agenteval-out=r.jsonl", *args)


@pytest.fixture(scope="module")
def small(small_bfcl_dir: Path) -> str:
    """`--bfcl-data-dir` of the small copy, for the runs whose items are among its entries:
    each run collects those, not all 10,306 (the process keeps both folders' parsed entries;
    `bfcl_entries_untouched` checks both)."""
    return f"--bfcl-data-dir={small_bfcl_dir}"


@pytest.mark.parametrize(
    ("marker", "categories"),
    [
        ("irrelevance", {"irrelevance", "live_irrelevance"}),
        ("parallel", {"parallel", "live_parallel"}),
        ("simple and java", {"simple_java"}),
        ("relevance", {"live_relevance"}),
    ],
)
def test_markers_select_their_categories(bfcl: pytest.Pytester, marker: str, categories: set) -> None:
    result = bfcl.runpytest("--co", "-q", "-m", marker, "--strict-markers", "--model-path=replay:none")
    ids = [line.split("[")[1].rstrip("]") for line in result.stdout.lines if "::test_bfcl[" in line]
    expected = [e.id for e in load_bfcl(sorted(categories))]
    assert sorted(ids) == sorted(expected)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("-m", "irrelevance", "--limit=3"), ["irrelevance_0", "irrelevance_1", "irrelevance_2"]),
        (
            ("-m", "simple_python or (multiple and non_live)", "--limit-per-category=2"),
            ["simple_python_0", "simple_python_1", "multiple_0", "multiple_1"],
        ),
        # progressive mode reorders items by stage; --limit still means dataset order
        (("--limit=3", "--bfcl-progressive=0.8"), ["simple_python_0", "simple_python_1", "simple_python_2"]),
    ],
)
def test_limits_apply_after_marker_selection(
    bfcl: pytest.Pytester, small: str, args: tuple, expected: list
) -> None:
    result = bfcl.runpytest("--co", "-q", small, *args)
    assert [
        line.split("[")[1].rstrip("]") for line in result.stdout.lines if "::test_bfcl[" in line
    ] == expected


def test_replay_scores_like_the_checker_and_reports_categories(bfcl: pytest.Pytester, small: str) -> None:
    simple = load_bfcl(["simple_python"])[:3]
    irrelevant = load_bfcl(["irrelevance"])[:2]
    texts = {
        simple[0].id: oracle_text(simple[0]),
        simple[1].id: oracle_text(simple[1]),
        simple[2].id: "I would call a function here.",
        irrelevant[0].id: "None of these functions fit.",
        irrelevant[1].id: oracle_text(simple[0]),
    }
    replay = write_jsonl(
        bfcl.path / "replay.jsonl",
        [{"problem_id": k, "sample_index": 0, "text": v} for k, v in texts.items()],
    )
    selection = [f"test_bfcl.py::test_bfcl[{item}]" for item in texts]
    result = run(bfcl, small, f"--model-path=replay:{replay}", *selection)
    result.assert_outcomes(passed=3, failed=2)
    problems, (summary,) = read_results(bfcl.path / "r.jsonl")
    expected = {e.id: score_text(e, texts[e.id]).verdict.valid for e in simple + irrelevant}
    assert {p["problem_id"]: p["generations"][0]["valid"] for p in problems} == expected
    assert expected == {
        simple[0].id: True,
        simple[1].id: True,
        simple[2].id: False,
        irrelevant[0].id: True,
        irrelevant[1].id: False,
    }
    assert summary["per_category"]["simple_python"]["accuracy"] == pytest.approx(2 / 3)
    assert summary["per_category"]["irrelevance"]["accuracy"] == 0.5
    assert summary["groups"]["simple"] == pytest.approx(2 / 3) and summary["groups"]["irrelevance"] == 0.5
    assert summary["error_types"] == {"ast_decoder:decoder_failed": 1, "irrelevance_error:decoder_success": 1}
    assert (summary["relevance"]["tp"], summary["relevance"]["fp"]) == (2, 1)

    again = run(bfcl, small, "--model-path=replay:r.jsonl", "--agenteval-out=again.jsonl", *selection)
    again.assert_outcomes(passed=3, failed=2)
    replayed, _ = read_results(bfcl.path / "again.jsonl")
    assert [p["generations"][0]["error_type"] for p in replayed] == [
        p["generations"][0]["error_type"] for p in problems
    ]


def test_export_writes_the_official_result_files(bfcl: pytest.Pytester, small: str) -> None:
    entries = load_bfcl(["simple_python"])[:2]
    replay = write_jsonl(
        bfcl.path / "replay.jsonl",
        [{"problem_id": e.id, "sample_index": 0, "text": oracle_text(e)} for e in entries],
    )
    result = run(
        bfcl,
        small,
        f"--model-path=replay:{replay}",
        *(f"test_bfcl.py::test_bfcl[{e.id}]" for e in entries),
        "--bfcl-export-dir=export",
        "--model-name=my-model",
    )
    result.assert_outcomes(passed=2)
    (path,) = (bfcl.path / "export").rglob("BFCL_v4_simple_python_result.json")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines == [{"id": e.id, "result": oracle_text(e)} for e in entries]


def test_progressive_mode_stops_a_failing_category_after_five(bfcl: pytest.Pytester) -> None:
    entries = load_bfcl(["simple_python", "multiple"])
    simple = [e for e in entries if e.category == "simple_python"][:60]
    multiple = [e for e in entries if e.category == "multiple"][:8]
    rows = [{"problem_id": e.id, "sample_index": 0, "text": oracle_text(e)} for e in simple]
    rows += [{"problem_id": e.id, "sample_index": 0, "text": "no idea"} for e in multiple]
    replay = write_jsonl(bfcl.path / "replay.jsonl", rows)
    result = run(
        bfcl,
        f"--model-path=replay:{replay}",
        "--bfcl-progressive=0.5",
        "-rs",
        *(f"test_bfcl.py::test_bfcl[{e.id}]" for e in simple + multiple),
    )
    assert result.parseoutcomes() == {"passed": 60, "failed": 5, "skipped": 3}  # multiple: first stage only
    _, (summary,) = read_results(bfcl.path / "r.jsonl")
    assert summary["complete"] is True and summary["per_category"]["simple_python"]["total"] == 60
    result.stdout.fnmatch_lines(["*progressive: multiple stopped after 5 items (accuracy 0.00 < 0.5)*"])


def test_progressive_mode_refuses_xdist(bfcl: pytest.Pytester) -> None:
    result = run(bfcl, "--bfcl-progressive=0.8", "-n", "2", "--model-path=replay:x")
    assert result.ret == 4 and "--bfcl-progressive decides each stage" in result.stderr.str()


def test_embedded_model_runs_simple_items_offline(bfcl: pytest.Pytester, small: str) -> None:
    result = run(bfcl, small, "-m", "simple", "--limit=3", "--max-tokens=24")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 3
    problems, (summary,) = read_results(bfcl.path / "r.jsonl")
    assert [p["problem_id"] for p in problems] == ["simple_python_0", "simple_python_1", "simple_python_2"]
    assert summary["per_category"]["simple_python"]["total"] == 3
    assert summary["temperature"] == 0.001 and summary["max_tokens"] == 24


def test_odd_literal_values_score_instead_of_crashing(bfcl: pytest.Pytester, small: str) -> None:
    entry = load_bfcl(["simple_python"])[0]
    texts = [
        "[calculate_triangle_area(base={1: 'a', 'b': 2}, height=5)]",
        "[calculate_triangle_area(base=b'x')]",
    ]
    replay = write_jsonl(
        bfcl.path / "replay.jsonl",
        [{"problem_id": entry.id, "sample_index": j, "text": t} for j, t in enumerate(texts)],
    )
    result = run(
        bfcl, small, f"--model-path=replay:{replay}", "--val-n=2", f"test_bfcl.py::test_bfcl[{entry.id}]"
    )
    result.assert_outcomes(failed=1)
