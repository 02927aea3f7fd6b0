"""A replay of recorded thinking generations (closed and unclosed), scored as the peers
score them: our verdict on each case with its reason, and lighteval's and lm-eval's where
they differ (docs/reasoning.md, "How a reasoning reply is scored").

The peers' columns come from their think handling as their code has it, re-expressed
here and scored with the same boxed-integer scorer, so only the think handling differs:
- lighteval `--remove-reasoning-tags` (PR #882, `remove_reasoning_tags` in
  lighteval/utils/utils.py): removes each *closed* `<think>...</think>` pair, so an
  unclosed block, or a closing tag without its opening tag, stays in the scored text;
- lm-eval `think_end_token` (#3216, `postprocess_generated_text` in lm_eval/models/utils.py):
  keeps what follows the *last* closing tag; without one, the whole text is scored."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_agenteval.api.records import THINKING_TRUNCATED, GenerationRecord, Rollout, generation_from_dict
from pytest_agenteval.scorers import MATH_SCORERS
from tests.conftest import read_results

RECORDED = Path(__file__).parent.parent / "data" / "thinking_generations.jsonl"
DOCS = Path(__file__).parent.parent.parent / "docs" / "reasoning.md"
TRUTH = "70"

# case -> (ours: correct, answer read, reason), lighteval correct, lm-eval correct
VERDICTS: dict[str, tuple[bool, str | None, str, bool, bool]] = {
    "closed block, right boxed after it": (True, "70", "the answer after the block", True, True),
    "wrong boxed in the thoughts, right after": (True, "70", "the thoughts are not read", True, True),
    "right boxed in the thoughts, wrong after": (False, "71", "the answer after the block", False, False),
    "unclosed, right boxed in the thoughts": (
        False,
        None,
        "thinking_truncated: no answer, the thoughts never count",
        True,
        True,
    ),
    "unclosed, no boxed": (False, None, "thinking_truncated", False, False),
    "close tag only, right boxed after": (
        True,
        "70",
        "the template opened the block: what precedes the closing tag is thoughts",
        True,
        True,
    ),
    "close tag only, right boxed in the thoughts, none after": (
        False,
        None,
        "no answer after the closing tag",
        True,
        False,
    ),
    "empty answer after a closed block": (False, None, "the answer is empty", False, False),
    "two closed blocks, right boxed in the second, none after": (
        False,
        None,
        "both blocks are thoughts; nothing after them",
        False,
        False,
    ),
    "closed block, wrong answer, then an unclosed block with the right boxed": (
        False,
        None,
        "thinking_truncated: the second block never closed",
        True,
        True,
    ),
    "no think block": (True, "70", "a reply without reasoning is its answer", True, True),
}


def recorded() -> list[dict]:
    return [json.loads(line) for line in RECORDED.read_text(encoding="utf-8").splitlines()]


def our_verdict(line: dict) -> tuple[bool, str | None, bool]:
    """The replay path: a recorded line read back, scored by AIME's text-only scorer, kept."""
    rollout = generation_from_dict({"seed": 0, **line}, ()).rollout
    score = MATH_SCORERS["boxed-integer"](rollout.text, TRUTH)
    kept = GenerationRecord(0, 0, rollout, score).to_dict()
    return kept["correct"], kept["answer"], kept["stop_reason"] == THINKING_TRUNCATED


def lighteval_text(text: str) -> str:
    while "<think>" in text and "</think>" in text:
        start = text.find("<think>")
        end = text.find("</think>", start)
        if end < 0:
            break
        text = text[:start] + text[end + len("</think>") :]
    return text


def lm_eval_text(text: str) -> str:
    return text.split("</think>")[-1].lstrip()


def test_the_table_covers_every_recorded_case() -> None:
    assert [line["case"] for line in recorded()] == list(VERDICTS)


@pytest.mark.parametrize("line", recorded(), ids=lambda line: line["case"])
def test_our_verdict_on_each_recorded_generation(line: dict) -> None:
    correct, answer, reason, _, _ = VERDICTS[line["case"]]
    assert our_verdict(line) == (correct, answer, reason.startswith(THINKING_TRUNCATED))


@pytest.mark.parametrize("line", recorded(), ids=lambda line: line["case"])
def test_the_peers_columns_follow_their_think_handling(line: dict) -> None:
    _, _, _, lighteval, lm_eval = VERDICTS[line["case"]]
    score = MATH_SCORERS["boxed-integer"]
    assert (
        score(lighteval_text(line["text"]), TRUTH).correct,
        score(lm_eval_text(line["text"]), TRUTH).correct,
    ) == (
        lighteval,
        lm_eval,
    )


def test_a_truncated_generation_is_incorrect_whatever_a_scorer_said() -> None:
    """A sampler that flagged the thoughts unclosed but left text: the record still says
    incorrect and unformatted (every suite, a user's own included)."""
    rollout = Rollout(text="\\boxed{70}", stop_reason=THINKING_TRUNCATED, finish_reason="length")
    kept = GenerationRecord(0, 0, rollout, MATH_SCORERS["boxed-integer"](rollout.text, TRUTH)).to_dict()
    assert (kept["correct"], kept["formatted"], kept["answer"], kept["stop_reason"]) == (
        False,
        False,
        None,
        THINKING_TRUNCATED,
    )


def docs_row(case: str) -> str:
    correct, answer, reason, lighteval, lm_eval = VERDICTS[case]

    def shown(value: bool) -> str:
        return "correct" if value else "incorrect"

    ours = f"{shown(correct)} ({answer or 'no answer'})"
    differs = [f"lighteval {shown(lighteval)}"] * (lighteval != correct) + [f"lm-eval {shown(lm_eval)}"] * (
        lm_eval != correct
    )
    return f"| {case} | {ours} | {reason} | {', '.join(differs) or 'same'} |"


def test_the_docs_table_is_this_table() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert [row for row in (docs_row(case) for case in VERDICTS) if row not in text] == []


def test_a_replay_through_the_plugin_scores_each_case_so(run_suite) -> None:
    result, out = run_suite(f"--model-path=replay:{RECORDED}", "--limit=1")
    result.assert_outcomes(passed=1)
    (problem,), (summary,) = read_results(out)
    got = {
        g["case"]: (g["correct"], g["answer"], g["stop_reason"] == THINKING_TRUNCATED)
        for g in problem["generations"]
    }
    assert got == {case: (v[0], v[1], v[2].startswith(THINKING_TRUNCATED)) for case, v in VERDICTS.items()}
    truncated = [g for g in problem["generations"] if g["stop_reason"] == THINKING_TRUNCATED]
    assert [(g["text"], g["reasoning"] is not None) for g in truncated] == [
        ("", True),
        ("", True),
        ("", True),
    ]
    assert summary["length"]["thinking_truncated"] == 3
    assert summary["length"]["reasoning_generations"] == 10
    result.stdout.fnmatch_lines(["*thinking truncated*3 of 11 generations (27.3%): reasoning never closed*"])


def test_the_report_s_stop_reason_table_shows_thinking_truncated(run_suite, tmp_path: Path) -> None:
    _, out = run_suite(f"--model-path=replay:{RECORDED}", "--limit=1")
    markdown = tmp_path / "report.md"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_agenteval",
            "report",
            str(out),
            "--label",
            "replay",
            "--markdown",
            str(markdown),
        ],
        check=True,
        capture_output=True,
    )
    lines = markdown.read_text(encoding="utf-8").splitlines()
    header = next(line for line in lines if "thinking_truncated" in line)
    row = lines[lines.index(header) + 2]
    cells = dict(zip(header.strip("|").split("|"), row.strip("|").split("|"), strict=True))
    assert {k.strip(): v.strip() for k, v in cells.items()}["thinking_truncated"] == "3"
