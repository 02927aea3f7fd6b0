"""BFCL memory and web search through pytest: scripted models on the OpenAI test server, a
local search server, bfcl-eval's own memory backends and web search tool (real sockets)."""

from __future__ import annotations

import importlib.util

import pytest

from pytest_agenteval.tasks.bfcl._agentic_data import load_agentic
from pytest_agenteval.tasks.bfcl._data import find_data_dir
from pytest_agenteval.tasks.bfcl._mt_env import missing_requirements
from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.bfcl.entries_guard import (
    bfcl_entries_frozen,  # noqa: F401 (parsed once, out of the collector's sight)
    bfcl_entries_untouched,  # noqa: F401 (checks the shared entries at the end)
)
from tests.bfcl.memory_script import MemoryModel
from tests.bfcl.search_script import SearchModel
from tests.bfcl.search_server import SearchServer
from tests.conftest import read_results

SUITE = """
from pytest_agenteval.tasks.bfcl.suite import Bfcl

agenteval_suite = Bfcl()


def test_bfcl(evaluation):
    evaluation.check()
"""


def _needs(*classes: str):
    missing = sorted({m for c in classes for m in missing_requirements(c)})
    return pytest.mark.skipif(bool(missing), reason=f"pip install {' '.join(missing)}")


@pytest.fixture
def bfcl(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_bfcl=SUITE)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        "-p", "no:cacheprovider", "--agenteval-out=r.jsonl", "--model-name=mock-model", "-rs", *args
    )


def _question(entry) -> str:
    return next(m["content"] for m in entry.question[0] if m["role"] == "user")


@_needs("MemoryAPI_kv", "MemoryAPI_rec_sum")
def test_memory_kv_and_rec_sum_answer_from_the_memory_their_conversations_wrote(bfcl, small_bfcl_dir) -> None:
    root = find_data_dir()
    entries = [e for c in ("memory_kv", "memory_rec_sum") for e in load_agentic(root, c)[:3]]
    # the 3 questions a category are the memory file's first: each xdist worker parses and
    # collects the small copy (each file's first 5 entries, the scenarios' conversations
    # whole), not all 10,306
    with OpenAITestServer(ServerConfig(script=MemoryModel(entries))) as server:
        result = run(
            bfcl,
            f"--endpoint={server.url}",
            f"--bfcl-data-dir={small_bfcl_dir}",
            "-m",
            "memory",
            "--limit-per-category=3",
            "-n",
            "2",
            "--bfcl-export-dir=export",
        )
    result.assert_outcomes(passed=6, skipped=3)  # memory_vector: no embedding model
    result.stdout.fnmatch_lines(["*memory_vector needs sentence-transformers*"])
    problems, (summary,) = read_results(bfcl.path / "r.jsonl")
    answered = {p["problem_id"]: p["generations"][0]["final_answer"] for p in problems}
    assert answered["memory_kv_0-customer-0"] == "{'answer': 'Michael', 'context': 'from my memory'}"
    assert answered["memory_rec_sum_2-customer-2"] == "{'answer': 'Seattle', 'context': 'from my memory'}"
    chain = problems[0]["generations"][0]["memory_chain"]
    assert chain["prerequisites"] == 10  # the customer scenario's conversations
    assert summary["groups"]["memory"] == 1.0 and summary["groups"]["agentic"] == 1.0
    # the leaderboard's: memory = mean(kv 1, vector 0 (absent), rec_sum 1), agentic = mean(0, memory)
    assert summary["overall_official"] == pytest.approx(40 * ((2 / 3) / 2) / 100)
    _official_agrees(bfcl.path / "export", summary, ["memory_kv", "memory_rec_sum"])


def _official_agrees(export, summary, categories) -> dict:
    """bfcl-eval's own evaluation of the exported files gives our counts."""
    from pytest_agenteval.tasks.bfcl.export import export_model_name
    from tests.bfcl.official_evaluate import REQUIREMENTS, official_scores

    if any(importlib.util.find_spec(module) is None for module in REQUIREMENTS):
        return {}
    official = official_scores(export, export_model_name("prompting"), categories)
    assert {c: s["correct_count"] for c, s in official["categories"].items()} == {
        c: summary["per_category"][c]["correct"] for c in categories
    }
    assert official["overall"] == pytest.approx(summary["overall_official"], abs=5e-5)
    return official


@_needs("MemoryAPI_rec_sum")
def test_a_model_that_writes_nothing_cannot_answer(bfcl) -> None:
    entries = load_agentic(find_data_dir(), "memory_rec_sum")[:2]
    model = MemoryModel(entries)
    model.facts = []  # stores nothing in the conversations
    with OpenAITestServer(ServerConfig(script=model)) as server:
        result = run(bfcl, f"--endpoint={server.url}", "-m", "memory_rec_sum", "--limit=2")
    result.assert_outcomes(failed=2)
    problems, _ = read_results(bfcl.path / "r.jsonl")
    assert {p["generations"][0]["error_type"] for p in problems} == {"agentic:answer_not_found"}


@_needs("WebSearchAPI")
def test_web_search_runs_the_official_tool_against_a_local_search_server(bfcl) -> None:
    entries = load_agentic(find_data_dir(), "web_search_base")[:2]
    pages = {_question(entries[0])[:60]: f"Our research shows the answer is {entries[0].answers[0]}."}
    script = SearchModel({_question(e): e.answers for e in entries})
    with SearchServer(pages) as search, OpenAITestServer(ServerConfig(script=script)) as server:
        result = run(
            bfcl,
            f"--endpoint={server.url}",
            f"--bfcl-search-backend={search.url}",
            "-m",
            "web_search",
            "--limit-per-category=2",
            "--bfcl-export-dir=export",
        )
    result.assert_outcomes(passed=2, failed=2)  # the second question has no page
    problems, (summary,) = read_results(bfcl.path / "r.jsonl")
    by_id = {p["problem_id"]: p["generations"][0] for p in problems}
    assert by_id["web_search_base_0"]["valid"] and by_id["web_search_no_snippet_0"]["valid"]
    base, no_snippet = (
        by_id[f"{c}_0"]["mt_turns"][0][0]["results"][0] for c in ("web_search_base", "web_search_no_snippet")
    )
    assert "'body': 'Our research shows" in base and "'body'" not in no_snippet
    assert [x["kind"] for x in search.log].count("search") == 4
    assert summary["groups"]["web_search"] == 0.5
    _official_agrees(bfcl.path / "export", summary, ["web_search_base", "web_search_no_snippet"])


def test_web_search_without_a_backend_skips_with_one_line(bfcl, monkeypatch) -> None:
    monkeypatch.delenv("SERPAPI_API_KEY", raising=False)
    with OpenAITestServer() as server:
        result = run(bfcl, f"--endpoint={server.url}", "-m", "web_search", "--limit=1")
        assert server.requests == []
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*web search needs a search backend: pass --bfcl-search-backend URL*"])


def test_a_search_backend_that_is_not_a_url_is_a_usage_error(bfcl) -> None:
    result = run(bfcl, "--bfcl-search-backend=localhost:9", "--co")
    assert result.ret == 4
    assert "--bfcl-search-backend must be an http(s) URL, got 'localhost:9'" in result.stderr.str()


def test_format_sensitivity_reports_the_spread_across_configurations(bfcl) -> None:
    from pytest_agenteval.tasks.bfcl._format_sensitivity import load_format_sensitivity
    from tests.bfcl.test_format_sensitivity import _oracle, render

    entry = load_format_sensitivity(find_data_dir())[0]
    reply = render(_oracle(entry), "python")  # right only where the format is Python without a tag
    with OpenAITestServer(ServerConfig(answer=reply)) as server:
        result = run(
            bfcl,
            f"--endpoint={server.url}",
            "-m",
            "format_sensitivity",
            "--limit=26",
            "--bfcl-export-dir=export",
        )
    result.assert_outcomes(passed=5, failed=21)
    _, (summary,) = read_results(bfcl.path / "r.jsonl")
    spread = summary["format_sensitivity"]
    passing = [c for c, row in spread["configs"].items() if row["accuracy"] == 1.0]
    assert len(spread["configs"]) == 26 and all("ret_fmt=python&tool_call_tag=False" in c for c in passing)
    assert spread["accuracy_max_delta"] == 100.0
    assert spread["accuracy_std"] == 40.19  # round(stdev(5 ones, 21 zeros) * 100, 2)
    assert summary["overall"] is None  # format sensitivity is not part of the overall score
    official = _official_agrees(bfcl.path / "export", summary, ["format_sensitivity"])
    if official:
        theirs = official["categories"]["format_sensitivity"]
        assert (theirs["accuracy_max_delta"], theirs["accuracy_std"]) == (100.0, 40.19)
