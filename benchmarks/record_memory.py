"""What the controller keeps per finished problem, measured with tracemalloc over 1,000
problem lines as xdist delivers them (execnet-serialised, as a worker's report arrives).

    python benchmarks/record_memory.py

Before issue 14 item 6 the controller kept the whole line (a dict); now it keeps the line
without its texts, packed (`output.summary.pack_record`), and where the whole line is on disk
(`ResultsFile._where`: the spool, offset and length)."""

from __future__ import annotations

import gc
import sys
import tempfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import execnet

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_agenteval.api.records import without_texts  # noqa: E402
from pytest_agenteval.output.results import ResultsFile  # noqa: E402
from pytest_agenteval.output.summary import pack_record as _pack  # noqa: E402

PROBLEMS = 1000


def line(index: int, samples: int, text: Callable[[int, int], str]) -> dict[str, Any]:
    """A problem line shaped as the soak's (aime25 text-only) lines are."""
    generations = [
        {
            "sample_index": j,
            "seed": 51072364 + 7919 * j + index,
            "text": text(index, j),
            "correct": j % 5 == 0,
            "formatted": True,
            "answer": "7",
            "predicted_answer": "7",
            "boxed_answer": "7",
            "scorer": "boxed-integer",
            "code_calls": 0,
            "turns": 1,
            "stop_reason": "answer",
            "finish_reason": "stop",
            "prompt_tokens": 26,
            "completion_tokens": 8,
            "latency_s": 0.0844 + j / 1000,
            "attempts": 1 + j % 2,
            "retries": j % 2,
            "cached": False,
        }
        for j in range(samples)
    ]
    return {
        "type": "problem",
        "suite": "aime25",
        "problem_id": index,
        "index": index,
        "nodeid": f"suites/aime25/test_aime25.py::test_aime25[{index}]",
        "markers": ["aime25"],
        "problem": f"What is {index} + {index}?",
        "ground_truth": str(2 * index),
        "prompt_hash": "42a71e5598479d80",
        "val_n": samples,
        "num_correct": sum(g["correct"] for g in generations),
        "pass_at_n": True,
        "complete": True,
        "error": None,
        "generations": generations,
    }


def soak_text(i: int, j: int) -> str:
    return f"So \\boxed{{7}} (seed {51072364 + 7919 * j + i})."


def long_text(i: int, j: int) -> str:
    """About 2.5 KB of varied reasoning, as a real model writes."""
    words = [f"step{(i * 31 + j * 17 + k * 7) % 997}" for k in range(300)]
    return " ".join(words) + " so \\boxed{7}."


def per_problem(blobs: list[bytes], keep: Callable[[dict[str, Any]], Any]) -> float:
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    kept = [keep(execnet.loads(blob)) for blob in blobs]
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    del kept
    return used / len(blobs)


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="agenteval-record-memory-"))
    print(f"{'lines (x 1000)':<34}{'before: dict':>14}{'now: packed':>13}{'+ location':>12}")
    cases = (("soak: 12 short texts", soak_text), ("12 texts of 2.5 KB", long_text))
    for label, text in cases:
        blobs = [execnet.dumps(line(i, 12, text)) for i in range(PROBLEMS)]
        before = per_problem(blobs, lambda data: data)
        packed = per_problem(blobs, lambda data: _pack(without_texts(data)))
        results = ResultsFile()
        out = folder / f"{text.__name__}.jsonl"
        where = per_problem(blobs, lambda data, r=results, o=out: r.stream(o, data["nodeid"], data))
        results.close()
        print(f"{label:<34}{before:>12.0f} B{packed:>11.0f} B{where:>10.0f} B")


if __name__ == "__main__":
    main()
