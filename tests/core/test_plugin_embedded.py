"""The embedded SmolLM2 model really generates through the plugin: same seeds give the
same samples whether one process or two xdist workers run them."""

from __future__ import annotations

from tests.conftest import read_results

FAST = ("--limit=2", "--val-n=2", "--max-tokens=16")


def _texts(path) -> list[tuple[int, int, int, str]]:
    problems, _ = read_results(path)
    return [
        (p["problem_id"], g["sample_index"], g["seed"], g["text"]) for p in problems for g in p["generations"]
    ]


def test_embedded_model_generates_and_results_match_across_worker_counts(run_suite) -> None:
    serial, one = run_suite(*FAST, out="serial.jsonl")
    parallel, two = run_suite(*FAST, "-n", "2", out="parallel.jsonl")
    assert serial.ret == parallel.ret == 1  # SmolLM2 solves none of these: plain pytest failures
    assert _texts(one) == _texts(two)
    texts = [t for *_, t in _texts(one)]
    assert len(texts) == 4 and all(t.strip() for t in texts) and len(set(texts)) == 4
    _, (summary,) = read_results(one)
    assert summary["model"]["name"] == "SmolLM2-135M-Instruct-Q4_1"
    assert summary["model"]["backend"] == "embedded"
    assert 4 <= summary["tokens"]["completion"] <= 64


def test_another_run_seed_changes_the_samples(run_suite) -> None:
    _, first = run_suite(*FAST, "--limit=1", out="a.jsonl")
    _, second = run_suite(*FAST, "--limit=1", "--seed=7", out="b.jsonl")
    assert [t for *_, t in _texts(first)] != [t for *_, t in _texts(second)]
    _, (summary,) = read_results(second)
    assert summary["config"]["seed"] == 7
