"""Where the finished problem lines live during a run: in a private copy on disk (a file
without a name beside the results, else in $TMPDIR), read back by offset; in memory only
when no disk takes them. The partial file is a crash log that may be damaged freely.
The final file is byte for byte what the in-memory records gave before."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.api.metrics import summarize_math
from pytest_agenteval.api.records import problem_from_dict, without_texts
from pytest_agenteval.output.results import ResultsFile, StoredRecords, request_totals, token_totals
from pytest_agenteval.testing import OpenAITestServer, Reply, ScriptedToolModel, ServerConfig

SCORE_FIELDS = ("predicted_answer", "boxed_answer", "scorer")


def _generation(j: int, text: str, **extra: Any) -> dict[str, Any]:
    return {
        "sample_index": j,
        "seed": 1_000_003 * (j + 1),
        "text": text,
        "correct": j % 2 == 0,
        "formatted": True,
        "answer": 70 if j % 2 == 0 else 7,
        "predicted_answer": "70" if j % 2 == 0 else "7",
        "scorer": "boxed-integer",
        "code_calls": 1 if "transcript" in extra else 0,
        "turns": 2 if "transcript" in extra else 1,
        "stop_reason": "answer",
        "finish_reason": "stop",
        "prompt_tokens": 26,
        "completion_tokens": 8 + j,
        "latency_s": 0.1234 + j / 7,
        "attempts": 1 + j % 2,
        "retries": j % 2,
        "cached": False,
        **extra,
    }


def _transcript(j: int) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "turn": 1, "content": "Let me compute.", "action": "call", "code": "print(70)"},
        {
            "role": "tool",
            "call": 1,
            "status": "ok" if j else "timeout",
            "output": "70\n",
            "latency_s": 0.014 * (j + 1),
            "cached": j == 2,
            "containment": "landlock",
        },
        {"role": "assistant", "turn": 2, "content": "So \\boxed{70}.", "action": "answer", "code": None},
    ]


def _problem(index: int, generations: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "type": "problem",
        "suite": "aime25",
        "problem_id": index,
        "index": index,
        "nodeid": f"test_tiny.py::test_aime25[{index}]",
        "markers": ["aime25"],
        "problem": f"What is {index} + 70?",
        "ground_truth": "70",
        "prompt_hash": "42a71e5598479d80",
        "val_n": len(generations),
        "num_correct": sum(g["correct"] for g in generations),
        "pass_at_n": any(g["correct"] for g in generations),
        "complete": True,
        "error": None,
        **extra,
        "generations": generations,
    }


LINES = {
    "plain": _problem(0, [_generation(j, f"So \\boxed{{70}} (seed {j}).") for j in range(3)]),
    "unicode and long texts": _problem(
        1, [_generation(j, "加法 ✓ \u00e9 " * 400 + '\\boxed{70}\n\ttab "quoted"') for j in range(2)]
    ),
    "transcripts": _problem(
        2, [_generation(j, "So \\boxed{70}.", transcript=_transcript(j)) for j in range(3)]
    ),
    "extra fields, tuples, an error": _problem(
        3,
        [_generation(0, "[f(a=1)]", tool_calls=({"name": "f", "arguments": '{"a": 1}'},))],
        category="simple",
        error="ServerError: 500 after 4 attempts",
    ),
    "no generations": _problem(4, [], error="worker crashed"),
}


def _old_final_file(lines: list[dict[str, Any]], summaries: list[dict[str, Any]]) -> str:
    """What the controller wrote before: records from the in-memory lines, dataset order."""
    records = sorted((problem_from_dict(line, SCORE_FIELDS) for line in lines), key=lambda r: r.index)
    rows = [r.to_dict() for r in records] + summaries
    return "".join(json.dumps(row, ensure_ascii=False, default=str) + "\n" for row in rows)


def _stored(results: ResultsFile, keys: list[str]) -> StoredRecords:
    return StoredRecords(results, keys, lambda data: problem_from_dict(data, SCORE_FIELDS))


def _stream_all(results: ResultsFile, out: Path, lines: dict[str, dict[str, Any]]) -> None:
    for key, line in lines.items():
        results.stream(out, key, line)


@pytest.mark.parametrize("case", list(LINES))
def test_a_line_reads_back_as_it_was_written(tmp_path: Path, case: str) -> None:
    results = ResultsFile()
    results.stream(tmp_path / "r.jsonl", case, LINES[case])
    assert results.stored_in(case) == "beside"
    assert results.read(case) == json.loads(json.dumps(LINES[case]))
    written = (tmp_path / "r.jsonl.partial").read_text(encoding="utf-8")
    assert written == json.dumps(LINES[case], ensure_ascii=False) + "\n"


def test_the_final_file_is_byte_for_byte_what_the_in_memory_records_gave(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    arrived = dict(reversed(list(LINES.items())))  # arrival order is not dataset order
    results = ResultsFile()
    _stream_all(results, out, arrived)
    summaries = [{"type": "summary", "suite": "aime25", "average_at_n": 0.5}]
    assert (
        results.finalize(out, _stored(results, sorted(LINES, key=lambda k: LINES[k]["index"])), summaries)
        == out
    )
    assert out.read_text(encoding="utf-8") == _old_final_file(list(LINES.values()), summaries)
    assert not (tmp_path / "r.jsonl.partial").exists() and results.notes == []


def _no_folder(tmp_path: Path) -> Path:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    return blocker  # a path under it cannot be made: NotADirectoryError


@pytest.mark.parametrize(
    ("private_disk", "kept_in"),
    [("writable", "temporary"), ("unwritable", "memory")],
)
def test_lines_the_partial_file_cannot_take_are_kept_whole(
    tmp_path: Path, monkeypatch, private_disk: str, kept_in: str
) -> None:
    if private_disk == "unwritable":
        monkeypatch.setattr(tempfile, "tempdir", str(_no_folder(tmp_path) / "tmp"))
    results = ResultsFile()
    _stream_all(results, _no_folder(tmp_path) / "out" / "r.jsonl", LINES)
    assert {results.stored_in(k) for k in LINES} == {kept_in}
    assert [results.read(k) for k in LINES] == json.loads(json.dumps(list(LINES.values())))
    assert len(results.notes) == 1 and results.notes[0].startswith("could not write the partial results file")
    final = tmp_path / "elsewhere.jsonl"
    assert results.finalize(final, _stored(results, list(LINES)), []) == final
    assert final.read_text(encoding="utf-8") == _old_final_file(list(LINES.values()), [])


@pytest.mark.parametrize("deleted", ["file", "folder"])
def test_a_partial_file_deleted_mid_run_still_gives_a_complete_final_file(
    tmp_path: Path, deleted: str
) -> None:
    out = tmp_path / "out" / "r.jsonl"
    partial = out.with_name("r.jsonl.partial")
    keys = list(LINES)
    results = ResultsFile()
    _stream_all(results, out, {k: LINES[k] for k in keys[:2]})
    partial.unlink() if deleted == "file" else shutil.rmtree(out.parent)
    _stream_all(results, out, {k: LINES[k] for k in keys[2:]})
    assert results.notes == [
        f"the partial results file {partial} was deleted during the run; "
        "it was written again with the 3 items finished so far"
    ]
    expected_partial = "".join(json.dumps(LINES[k], ensure_ascii=False) + "\n" for k in keys)
    assert partial.read_text(encoding="utf-8") == expected_partial  # what a crash now leaves
    assert {results.stored_in(k) for k in keys} == {"beside"}  # a file without a name survives
    final = tmp_path / "final.jsonl"
    results.finalize(final, _stored(results, keys), [])
    assert final.read_text(encoding="utf-8") == _old_final_file(list(LINES.values()), [])


def test_a_deleted_partial_file_that_cannot_be_made_again_still_reads_back(tmp_path: Path) -> None:
    out = tmp_path / "out" / "r.jsonl"
    keys = list(LINES)
    results = ResultsFile()
    _stream_all(results, out, {k: LINES[k] for k in keys[:2]})
    shutil.rmtree(out.parent)
    (tmp_path / "out").write_text("")  # its folder cannot come back
    _stream_all(results, out, {k: LINES[k] for k in keys[2:]})
    assert [results.stored_in(k) for k in keys] == ["beside"] * 5
    assert results.notes[0].startswith("could not write the partial results file")
    final = tmp_path / "final.jsonl"
    results.finalize(final, _stored(results, keys), [])
    assert final.read_text(encoding="utf-8") == _old_final_file(list(LINES.values()), [])


@pytest.mark.parametrize("damage", ["truncated", "overwritten"])
def test_a_partial_file_damaged_mid_run_does_not_touch_the_final_file(tmp_path: Path, damage: str) -> None:
    """The partial file is a crash log in the user's folder: emptied to free a full disk,
    or edited, it must not be where the final file comes from."""
    out = tmp_path / "r.jsonl"
    partial = out.with_name("r.jsonl.partial")
    keys = list(LINES)
    results = ResultsFile()
    _stream_all(results, out, {k: LINES[k] for k in keys[:3]})
    partial.write_text("" if damage == "truncated" else '{"type": "problem", "problem_id": "forged"}\n' * 40)
    _stream_all(results, out, {k: LINES[k] for k in keys[3:]})
    ordered = sorted(keys, key=lambda k: LINES[k]["index"])
    assert results.finalize(out, _stored(results, ordered), []) == out
    assert out.read_text(encoding="utf-8") == _old_final_file(list(LINES.values()), [])
    assert results.notes == [] and not partial.exists()


def test_two_runs_writing_the_same_results_path_each_keep_their_own_lines(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    keys = list(LINES)
    first, second = ResultsFile(), ResultsFile()
    _stream_all(first, out, {k: LINES[k] for k in keys[:2]})
    _stream_all(second, out, {k: LINES[k] for k in keys[2:]})  # truncates the same partial file
    _stream_all(first, out, {k: LINES[k] for k in keys[2:4]})
    assert first.finalize(out, _stored(first, keys[:4]), []) == out
    assert out.read_text(encoding="utf-8") == _old_final_file([LINES[k] for k in keys[:4]], [])
    other = tmp_path / "second.jsonl"
    assert second.finalize(other, _stored(second, keys[2:]), []) == other
    assert other.read_text(encoding="utf-8") == _old_final_file([LINES[k] for k in keys[2:]], [])


def test_no_descriptor_is_left_open_by_a_run_that_never_finalizes(tmp_path: Path) -> None:
    import gc
    import os

    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        results = ResultsFile()
        _stream_all(results, tmp_path / "r.jsonl", LINES)
        del results
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) == before


def test_summaries_read_the_same_from_records_without_texts() -> None:
    full = [problem_from_dict(line, SCORE_FIELDS) for line in LINES.values()]
    compact = [problem_from_dict(without_texts(line), SCORE_FIELDS) for line in LINES.values()]
    assert summarize_math(compact) == summarize_math(full)
    assert summarize_math(compact)["sandbox"]["calls"] == 3  # the transcripts' tool entries count
    assert (token_totals(compact), request_totals(compact)) == (token_totals(full), request_totals(full))
    assert all(g.rollout.text == "" for r in compact for g in r.generations)
    assert all("content" not in e for r in compact for g in r.generations for e in g.rollout.transcript or ())


# -- a whole run: the final file against the lines as they arrived -----------------------

CAPTURE = """
import copy, json
import pytest
from pytest_agenteval.api.records import problem_from_dict
from pytest_agenteval.tasks.registry import suite_by_name
RECORD = "agenteval_record"
ARRIVED = {}
WORKER = []
def pytest_configure(config):
    WORKER.append(hasattr(config, "workerinput"))
def pytest_runtest_logreport(report):
    for name, value in report.user_properties:
        if name == "agenteval_record" and not WORKER[0]:
            ARRIVED.setdefault(report.nodeid, copy.deepcopy(value))
def pytest_unconfigure(config):
    if WORKER[0]:
        return
    collector = config.pluginmanager.get_plugin("agenteval-results")
    by_suite = {}
    for value in ARRIVED.values():  # what the controller held and wrote before
        suite = suite_by_name(value["suite"])
        by_suite.setdefault(value["suite"], []).append(problem_from_dict(value, suite.score_fields))
    rows, summaries = [], {}
    for name in sorted(by_suite):
        records = sorted(by_suite[name], key=lambda r: r.index)
        rows += [r.to_dict() for r in records]
        scored = [r for r in records if r.complete]
        summaries[name] = suite_by_name(name).summarize(scored, collector.settings)
    rows += collector.summaries
    with open("expected.jsonl", "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(row, ensure_ascii=False, default=str) + "\\n" for row in rows)
    with open("summarized.json", "w", encoding="utf-8") as handle:
        json.dump(summaries, handle, default=str)
    reports = config.pluginmanager.get_plugin("terminalreporter").stats.values()
    kept = [r for rs in reports for r in rs for n, _ in getattr(r, "user_properties", ()) if n == RECORD]
    with open("records_in_reports.json", "w") as handle:
        json.dump(len(kept), handle)
"""


def _unchanged(pytester: pytest.Pytester, out: Path) -> None:
    expected = (pytester.path / "expected.jsonl").read_bytes()
    # the terminal reporter keeps every report to the end: none may keep its record
    assert json.loads((pytester.path / "records_in_reports.json").read_text()) == 0
    assert expected.count(b"\n") >= 2 and out.read_bytes() == expected
    summaries = {s["suite"]: s for s in map(json.loads, out.read_text(encoding="utf-8").splitlines()[-1:])}
    for name, fields in json.loads((pytester.path / "summarized.json").read_text()).items():
        # the summary read from records without texts = summarize over the whole lines
        assert {k: json.loads(json.dumps(summaries[name][k], default=str)) for k in fields} == fields


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_run_writes_the_final_file_the_in_memory_records_gave(
    run_suite, pytester: pytest.Pytester, workers: str
) -> None:
    pytester.makeconftest(CAPTURE)
    answer = '加法 ✓ é "quoted"\n\t' * 40 + "\\boxed{70} {seed}"
    with OpenAITestServer(ServerConfig(answer=answer)) as server:
        result, out = run_suite(f"--endpoint={server.url}", "--val-n=3", "-n", workers)
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    _unchanged(pytester, out)


CODE = {"code": "print(70)"}


def test_a_retool_run_writes_the_final_file_the_in_memory_records_gave(
    run_suite, pytester: pytest.Pytester
) -> None:
    pytester.makeconftest(CAPTURE)
    script = ScriptedToolModel(
        [
            Reply(text="Let me compute.", tool_calls=[{"name": "code_interpreter", "arguments": CODE}]),
            lambda observation, body: f"The tool printed {observation.strip()}, so \\boxed{{70}}.",
        ]
    )
    with OpenAITestServer(ServerConfig(script=script)) as server:
        result, out = run_suite(f"--endpoint={server.url}", "--mode=retool", "--limit=2", "--val-n=2")
    result.assert_outcomes(passed=1, failed=1)  # 70 is right for problem 0 only
    assert json.loads(out.read_text().splitlines()[-1])["sandbox"]["calls"] == 4
    _unchanged(pytester, out)


def test_a_results_file_with_nothing_streamed_is_written_without_a_note(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    results = ResultsFile()
    summary = {"type": "summary", "suite": "aime25"}
    assert results.finalize(out, [], [summary]) == out  # it raised IndexError
    assert out.read_text(encoding="utf-8") == json.dumps(summary) + "\n" and results.notes == []
