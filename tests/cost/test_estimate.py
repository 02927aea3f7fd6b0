"""--estimate against the OpenAI test server: it runs a sample of the selection, prints the
projected tokens and cost of all of it (within a few percent of a full run's real tokens),
sends nothing for the rest, counts cache hits with their recorded tokens, and exits 0."""

from __future__ import annotations

import re

import pytest

from pytest_agenteval.plugin.cost import project, sample_positions
from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import read_results, write_jsonl

PROBLEMS = [
    {"id": i, "problem": f"What is {i} + {i}? " + "Think. " * (3 * i), "answer": str(2 * i)}
    for i in range(12)
]
PRICES = '[models."mock-model"]\ninput = 1.0\noutput = 2.0\n'
LINE = re.compile(
    r"estimate aime25: (\d+) prompt \+ (\d+) completion tokens, \$([0-9.]+), for all 12 selected items "
    r"\(the mean of 3 sample items, (\d) of them from the cache, x 12\)"
)


@pytest.mark.parametrize(
    ("count", "sample", "positions"),
    [(12, 3, [2, 6, 10]), (3, 3, [0, 1, 2]), (2, 3, [0, 1]), (10, 1, [5]), (0, 3, []), (7, 2, [1, 5])],
)
def test_the_sample_is_spread_evenly_over_the_selection(
    count: int, sample: int, positions: list[int]
) -> None:
    assert sample_positions(count, sample) == positions


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["no-xdist", "xdist"])
def test_the_estimate_projects_the_whole_selection_from_a_sample(
    run_suite, pytester: pytest.Pytester, workers: tuple[str, ...]
) -> None:
    data = write_jsonl(pytester.path / "twelve.jsonl", PROBLEMS)
    (pytester.path / "prices.toml").write_text(PRICES)
    common = ("--model-name=mock-model", "--prices=prices.toml", "--val-n=2", "--max-tokens=60", *workers)
    with OpenAITestServer(ServerConfig(answer="It is \\boxed{7}, as {seed} says.")) as server:
        estimate, _ = run_suite(f"--endpoint={server.url}", *common, "--estimate", data=data, out="e.jsonl")
        estimated_requests = len(server.requests)
        server.reset()
        full, out = run_suite(f"--endpoint={server.url}", *common, data=data, out="full.jsonl")
        full_requests = len(server.requests)
        server.reset()
        again, _ = run_suite(f"--endpoint={server.url}", *common, "--estimate", data=data, out="e2.jsonl")
        again_requests = len(server.requests)
    assert estimate.ret == pytest.ExitCode.OK and again.ret == pytest.ExitCode.OK  # every answer is wrong
    assert full.ret == pytest.ExitCode.TESTS_FAILED
    assert estimated_requests == 6  # 3 sample items x 2 samples; the other 9 items send nothing
    assert full_requests == 24 - 6  # the full run: the sample's 6 came from the cache
    assert again_requests == 0  # a second estimate reads the cache
    projected = LINE.search(estimate.stdout.str())
    assert projected is not None, estimate.stdout.str()
    _, (summary,) = read_results(out)
    actual_prompt, actual_completion = summary["tokens"]["prompt"], summary["tokens"]["completion"]
    assert abs(int(projected[1]) - actual_prompt) / actual_prompt < 0.05
    assert abs(int(projected[2]) - actual_completion) / actual_completion < 0.05
    assert abs(float(projected[3]) - summary["cost"]["usd"]) / summary["cost"]["usd"] < 0.05
    assert projected[4] == "0"
    cached = LINE.search(again.stdout.str())
    assert (
        cached is not None and cached[4] == "3" and cached.groups()[:3] == projected.groups()[:3]
    )  # same tokens, from the cache


def _item(
    prompt: int, completion: int, cost: float | None, cached: bool = False, complete: bool = True
) -> dict:
    generation = {"sample_index": 0, "seed": 0, "prompt_tokens": prompt, "completion_tokens": completion}
    generation.update(cached=cached, **({"cost_usd": cost} if cost is not None else {}))
    return {
        "suite": "s",
        "problem_id": 0,
        "index": 0,
        "val_n": 1,
        "complete": complete,
        "generations": [generation],
    }


@pytest.mark.parametrize(
    ("items", "line"),
    [
        (
            [_item(100, 10, 0.001), _item(300, 30, 0.003, cached=True)],
            "estimate s: 2000 prompt + 200 completion tokens, $0.020000, for all 10 selected items "
            "(the mean of 2 sample items, 1 of them from the cache, x 10)",
        ),
        (
            [_item(100, 10, None), _item(1, 1, 0.0, complete=False)],  # an errored item is not a sample
            "estimate s: 1000 prompt + 100 completion tokens, no USD (no price), for all 10 selected items "
            "(the mean of 1 sample items, 0 of them from the cache, x 10)",
        ),
        (
            [_item(1, 1, 0.0, complete=False)],
            "estimate s: none of the 1 sample items finished: 10 items not projected",
        ),
    ],
)
def test_the_projection_is_the_mean_sample_item_times_the_selection(items: list, line: str) -> None:
    assert project("s", items, 10) == line
