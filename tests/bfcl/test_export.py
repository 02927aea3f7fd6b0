"""Official result files for ``bfcl evaluate``."""

from __future__ import annotations

import json

import pytest

from pytest_agenteval.tasks.bfcl import export_official_results, result_path
from tests._oracle import require_oracle

from .official_checker import OfficialJudge, missing_official_requirements

ITEMS = [
    ("simple_python_10", "simple_python", "[f(a=1)]"),
    ("live_simple_2-1-0", "live_simple", "[g(b='x')]"),
    ("simple_python_2", "simple_python", "I cannot help."),
    ("live_simple_10-3-1", "live_simple", [{"g": '{"b": "y"}'}]),  # native tool calls
    ("irrelevance_0", "irrelevance", ""),
]


def _lines(path):
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def test_one_file_per_category_in_the_official_layout(tmp_path):
    paths = export_official_results(ITEMS, tmp_path, "Qwen/Qwen3-8B")
    assert paths == [
        tmp_path / "Qwen_Qwen3-8B/non_live/BFCL_v4_simple_python_result.json",
        tmp_path / "Qwen_Qwen3-8B/non_live/BFCL_v4_irrelevance_result.json",
        tmp_path / "Qwen_Qwen3-8B/live/BFCL_v4_live_simple_result.json",
    ]


def test_lines_are_id_and_result_objects_sorted_by_index(tmp_path):
    export_official_results(ITEMS, tmp_path, "m")
    simple = _lines(result_path(tmp_path, "m", "simple_python"))
    assert simple == [
        '{"id": "simple_python_2", "result": "I cannot help."}\n',
        '{"id": "simple_python_10", "result": "[f(a=1)]"}\n',
    ]
    live = [json.loads(line) for line in _lines(result_path(tmp_path, "m", "live_simple"))]
    assert live == [
        {"id": "live_simple_2-1-0", "result": "[g(b='x')]"},
        {"id": "live_simple_10-3-1", "result": [{"g": '{"b": "y"}'}]},
    ]


def test_an_export_replaces_the_previous_file(tmp_path):
    export_official_results(ITEMS, tmp_path, "m")
    export_official_results([("irrelevance_3", "irrelevance", "no")], tmp_path, "m")
    assert _lines(result_path(tmp_path, "m", "irrelevance")) == ['{"id": "irrelevance_3", "result": "no"}\n']


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([("simple_python_1", "simple_java", "x")], "does not belong to category 'simple_java'"),
        ([("exec_simple_1", "exec_simple", "x")], "unknown BFCL category 'exec_simple'"),
        ([("multiple_1", "multiple", "x"), ("multiple_1", "multiple", "y")], "duplicate result"),
    ],
)
def test_inconsistent_items_are_refused(tmp_path, items, message):
    with pytest.raises(ValueError, match=message):
        export_official_results(items, tmp_path, "m")


def test_the_official_loader_reads_the_files_back(tmp_path):
    missing = missing_official_requirements()
    if missing:
        require_oracle(f"the official reader is not installed: pip install {', '.join(missing)}")
    utils = OfficialJudge().utils
    for path in export_official_results(ITEMS, tmp_path, "m"):
        category = utils.extract_test_category(path)
        loaded = utils.load_file(path, sort_by_id=True)
        ours = [(i, r) for i, c, r in sorted(ITEMS, key=lambda item: item[0]) if c == category]
        assert sorted((e["id"], json.dumps(e["result"])) for e in loaded) == sorted(
            (i, json.dumps(r)) for i, r in ours
        )
        assert [e["id"] for e in loaded] == [json.loads(line)["id"] for line in _lines(path)]
        assert path.parent.name == utils.get_directory_structure_by_id(loaded[0]["id"])


def test_a_run_with_no_scored_item_exports_nothing_and_records_no_command(tmp_path):
    """Every item errored: no file, and no `bfcl evaluate` with an empty --test-category."""
    from pytest_agenteval.api.records import ProblemRecord
    from pytest_agenteval.config.settings import Settings
    from pytest_agenteval.tasks.bfcl.suite import Bfcl

    errored = ProblemRecord(
        suite="bfcl",
        problem_id="multi_turn_base_0",
        index=0,
        problem="",
        ground_truth=None,
        val_n=1,
        generations=(),
        error="sample 0: SamplerError: the endpoint is down",
        extra={"category": "multi_turn_base"},
    )
    settings = Settings(bfcl_export_dir=str(tmp_path / "export"))
    assert Bfcl().after_run([errored], settings) == {"exported": [], "bfcl_evaluate": None}
    assert not (tmp_path / "export").exists()
