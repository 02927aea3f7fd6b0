"""Finding and loading the official BFCL data."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter

import pytest

from pytest_agenteval.tasks.bfcl import CATEGORIES, BfclDataError, category_markers, load_bfcl
from tests._oracle import require_oracle


@pytest.mark.parametrize(
    ("category", "markers"),
    [
        ("simple_python", ("simple_python", "simple", "non_live", "python")),
        ("simple_java", ("simple_java", "simple", "non_live", "java")),
        ("simple_javascript", ("simple_javascript", "simple", "non_live", "javascript")),
        ("live_simple", ("live_simple", "simple", "live", "python")),
        ("multiple", ("multiple", "non_live", "python")),
        ("live_multiple", ("live_multiple", "multiple", "live", "python")),
        ("parallel_multiple", ("parallel_multiple", "non_live", "python")),
        ("live_parallel", ("live_parallel", "parallel", "live", "python")),
        ("irrelevance", ("irrelevance", "non_live", "python")),
        ("live_irrelevance", ("live_irrelevance", "irrelevance", "live", "python")),
        ("live_relevance", ("live_relevance", "relevance", "live", "python")),
    ],
)
def test_category_markers(category, markers):
    assert category_markers(category) == markers


def _write_jsonl(path, records):
    path.parent.mkdir(parents=True, exist_ok=True)
    # Like the official files: one object per line, no trailing newline.
    path.write_text("\n".join(json.dumps(r) for r in records), encoding="utf-8")


def _prompt(entry_id, name="f"):
    question = [[{"role": "user", "content": f"question {entry_id}"}]]
    function = [{"name": name, "description": "d", "parameters": {"type": "dict", "properties": {}}}]
    return {"id": entry_id, "question": question, "function": function}


@pytest.fixture
def data_dir(tmp_path):
    _write_jsonl(tmp_path / "BFCL_v4_irrelevance.json", [_prompt("irrelevance_0")])
    _write_jsonl(tmp_path / "BFCL_v4_simple_java.json", [_prompt("simple_java_0", "A.b")])
    _write_jsonl(
        tmp_path / "possible_answer/BFCL_v4_simple_java.json",
        [{"id": "simple_java_0", "ground_truth": [{"A.b": {}}]}],
    )
    _write_jsonl(tmp_path / "BFCL_v4_multiple.json", [_prompt("multiple_1"), _prompt("multiple_0")])
    _write_jsonl(
        tmp_path / "possible_answer/BFCL_v4_multiple.json",
        [
            {"id": "multiple_1", "ground_truth": [{"f": {}}]},
            {"id": "multiple_0", "ground_truth": []},
        ],
    )
    return tmp_path


def test_entries_come_in_category_order_then_file_order(data_dir):
    entries = load_bfcl(["irrelevance", "multiple", "simple_java"], data_dir)
    assert [(e.id, e.category, e.language) for e in entries] == [
        ("simple_java_0", "simple_java", "java"),
        ("multiple_1", "multiple", "python"),
        ("multiple_0", "multiple", "python"),
        ("irrelevance_0", "irrelevance", "python"),
    ]
    assert entries[1].ground_truth == [{"f": {}}]
    assert entries[1].question == [[{"role": "user", "content": "question multiple_1"}]]
    assert entries[3].ground_truth is None


def test_unknown_categories_are_named(data_dir):
    with pytest.raises(BfclDataError, match="unknown BFCL categories exec_simple: choose from"):
        load_bfcl(["exec_simple"], data_dir)


def test_a_missing_folder_names_the_option(tmp_path):
    with pytest.raises(BfclDataError, match="--bfcl-data-dir .*nowhere is not a folder"):
        load_bfcl(["multiple"], tmp_path / "nowhere")


def test_a_missing_file_names_the_fix(data_dir):
    with pytest.raises(BfclDataError, match=r"BFCL_v4_parallel.json not found: pip install"):
        load_bfcl(["parallel"], data_dir)


def test_a_malformed_line_is_reported_with_its_number(data_dir):
    (data_dir / "BFCL_v4_irrelevance.json").write_text('{"id": "irrelevance_0"}\n{oops', "utf-8")
    with pytest.raises(BfclDataError, match="BFCL_v4_irrelevance.json line 2 is not JSON"):
        load_bfcl(["irrelevance"], data_dir)


def test_answers_must_align_with_prompts(data_dir):
    _write_jsonl(data_dir / "possible_answer/BFCL_v4_simple_java.json", [{"id": "other", "ground_truth": []}])
    with pytest.raises(BfclDataError, match="simple_java: prompt and possible_answer ids differ"):
        load_bfcl(["simple_java"], data_dir)


def test_the_installed_package_data_has_the_official_entry_counts():
    if importlib.util.find_spec("bfcl_eval") is None:
        require_oracle("bfcl-eval's data is the oracle: pip install --no-deps bfcl-eval==2026.3.23")
    counts = Counter(entry.category for entry in load_bfcl(CATEGORIES))
    assert counts == {
        "simple_python": 400,
        "simple_java": 100,
        "simple_javascript": 50,
        "multiple": 200,
        "parallel": 200,
        "parallel_multiple": 200,
        "irrelevance": 240,
        "live_simple": 258,
        "live_multiple": 1053,
        "live_parallel": 16,
        "live_parallel_multiple": 24,
        "live_irrelevance": 884,
        "live_relevance": 16,
    }
