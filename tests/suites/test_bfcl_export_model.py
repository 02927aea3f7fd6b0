"""The BFCL export is a folder `bfcl evaluate` accepts as written: a model name bfcl-eval
lists, of the run's inference style, and the exact official command in the summary."""

from __future__ import annotations

import json

import pytest

from pytest_agenteval.tasks.bfcl import load_bfcl
from tests.conftest import read_results, write_jsonl
from tests.suites.test_bfcl_suite import SUITE, oracle_text

pytest.importorskip("tree_sitter", reason="BFCL java/javascript decoding needs: pip install -e '.[bfcl]'")


@pytest.fixture
def bfcl(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_bfcl=SUITE)
    return pytester


def run_export(bfcl: pytest.Pytester, *args: str) -> pytest.RunResult:
    entries = load_bfcl(["simple_python"])[:2] + load_bfcl(["irrelevance"])[:1]
    texts = [oracle_text(e) for e in entries[:2]] + [
        "[calculate_bmi(weight=70, height=1.75)]"
    ]  # a call: wrong
    rows = [{"problem_id": e.id, "sample_index": 0, "text": t} for e, t in zip(entries, texts, strict=True)]
    replay = write_jsonl(bfcl.path / "replay.jsonl", rows)
    return bfcl.runpytest(
        "-p",
        "no:cacheprovider",
        "--agenteval-out=r.jsonl",
        f"--model-path=replay:{replay}",
        "--bfcl-export-dir=export",
        *(f"test_bfcl.py::test_bfcl[{e.id}]" for e in entries),
        *args,
    )


def test_the_default_export_model_is_a_prompting_model_bfcl_eval_lists(bfcl: pytest.Pytester) -> None:
    result = run_export(bfcl, "--model-name=smollm2")  # the served name is not a bfcl-eval model
    result.assert_outcomes(passed=2, failed=1)
    root = (bfcl.path / "export").resolve()
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*.json")) == [
        "open-mistral-nemo-2407/non_live/BFCL_v4_irrelevance_result.json",
        "open-mistral-nemo-2407/non_live/BFCL_v4_simple_python_result.json",
    ]
    _, (summary,) = read_results(bfcl.path / "r.jsonl")
    assert summary["bfcl_evaluate"] == (
        f"bfcl evaluate --model open-mistral-nemo-2407 --test-category simple_python,irrelevance "
        f"--result-dir {root} --score-dir {root / 'score'} --partial-eval"
    )
    from bfcl_eval.constants.supported_models import SUPPORTED_MODELS

    assert "open-mistral-nemo-2407" in SUPPORTED_MODELS and "agenteval-model" not in SUPPORTED_MODELS


def test_bfcl_export_model_overrides_the_default(bfcl: pytest.Pytester) -> None:
    result = run_export(bfcl, "--bfcl-export-model=gpt-4.1-2025-04-14")
    result.assert_outcomes(passed=2, failed=1)
    (path,) = (bfcl.path / "export" / "gpt-4.1-2025-04-14").rglob("BFCL_v4_irrelevance_result.json")
    assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == ["irrelevance_0"]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "agenteval-model",
            "--bfcl-export-model 'agenteval-model': bfcl evaluate refuses it (not a model bfcl-eval lists); "
            "pick one from bfcl_eval.constants.supported_models, e.g. 'open-mistral-nemo-2407'",
        ),
        (
            "open-mistral-nemo-2407-FC",
            "--bfcl-export-model 'open-mistral-nemo-2407-FC' does not match --bfcl-style prompting: "
            "bfcl evaluate would decode the outputs wrongly; pick a prompting model (no -FC)",
        ),
    ],
)
def test_a_name_bfcl_evaluate_would_refuse_is_a_usage_error(
    bfcl: pytest.Pytester, name: str, message: str
) -> None:
    result = run_export(bfcl, f"--bfcl-export-model={name}")
    assert result.ret == 4
    assert f"ERROR: {message}" in result.stderr.lines
