"""GAIA's transcript is a list of messages, as AIME's is; an older results line whose
transcript is one string still reads back (as one assistant message) instead of turning
into a tuple of characters that the summaries then fail on."""

from __future__ import annotations

import pytest

from pytest_agenteval.api.metrics import sandbox_stats
from pytest_agenteval.api.records import ProblemRecord, generation_from_dict, without_texts

LINE = {
    "sample_index": 0,
    "seed": 1,
    "text": "FINAL ANSWER: 3",
    "correct": False,
    "formatted": True,
    "answer": "3",
    "stop_reason": "answer",
}


SEARCH = {"role": "assistant", "content": "searching"}
TOOL = {"role": "tool", "status": "ok", "latency_s": 0.1}


@pytest.mark.parametrize(
    ("recorded", "read", "tool_calls", "kept"),
    [
        (
            "I looked it up.",
            ({"role": "assistant", "content": "I looked it up."},),
            0,
            [{"role": "assistant"}],
        ),
        ([SEARCH, TOOL], (SEARCH, TOOL), 1, [{"role": "assistant"}, TOOL]),
        (None, None, 0, None),
    ],
    ids=["old-string", "list", "none"],
)
def test_a_transcript_reads_back_as_messages(recorded, read, tool_calls: int, kept) -> None:
    generation = generation_from_dict({**LINE, "transcript": recorded}, ())
    assert generation.rollout.transcript == read
    record = ProblemRecord("gaia", "t1", 0, "q", "24", 1, (generation,))
    assert sandbox_stats([record])["calls"] == tool_calls
    line = without_texts({"generations": [{**LINE, "transcript": recorded}]})
    assert line["generations"][0]["transcript"] == kept
