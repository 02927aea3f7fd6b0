"""BFCL multi-turn when the conversation outgrows the model's context (issue 25 item 1):
each such entry is scored `multi_turn:inference_error`, as the official runner scores it,
exported, named in the recorded `bfcl evaluate` command, and what its answered requests
spent is counted. On the embedded model (in-process llama.cpp, a small `--n-ctx`) and on
the test server refusing as llama.cpp's server and vLLM do (real sockets, with xdist)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_agenteval.tasks.bfcl._data import MULTI_TURN_CATEGORIES, find_data_dir
from pytest_agenteval.tasks.bfcl._mt_data import load_multi_turn
from pytest_agenteval.tasks.bfcl._mt_env import missing_requirements
from pytest_agenteval.tasks.bfcl._prompt import prompt_messages
from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from pytest_agenteval.testing._render import estimate_prompt_tokens
from tests._oracle import require_oracle
from tests.bfcl.entries_guard import bfcl_entries_frozen  # noqa: F401 (parsed once, out of the collector's sight)
from tests.bfcl.mt_script import GroundTruthModel
from tests.conftest import read_results

SUITE = """
from pytest_agenteval.tasks.bfcl.suite import Bfcl

agenteval_suite = Bfcl()


def test_bfcl(evaluation):
    evaluation.check()
"""


@pytest.fixture(scope="module", autouse=True)
def _bfcl_eval_environments() -> None:
    if missing_requirements():
        require_oracle(
            f"bfcl-eval's environments are not installed: pip install {' '.join(missing_requirements())}"
        )


SELECT = ("-p", "no:cacheprovider", "-m", "multi_turn", "--limit-per-category=1")
SELECT += ("--agenteval-out=r.jsonl", "--bfcl-export-dir=export")
EXPORT_MODEL = "open-mistral-nemo-2407"  # the prompting style's default export folder


@pytest.fixture(scope="module")
def selected():
    """The first entry of each multi-turn category: what `--limit-per-category=1` picks."""
    root = find_data_dir()
    return [load_multi_turn(root, c)[0] for c in MULTI_TURN_CATEGORIES]


@pytest.fixture
def bfcl(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_bfcl=SUITE)
    return pytester


def _exported(root, entry_id: str, category: str):
    path = root / "export" / EXPORT_MODEL / "multi_turn" / f"BFCL_v4_{category}_result.json"
    (line,) = [json.loads(x) for x in path.read_text().splitlines()]
    assert line["id"] == entry_id
    return line["result"]


def _command(root) -> str:
    return (
        f"bfcl evaluate --model {EXPORT_MODEL} --test-category {','.join(MULTI_TURN_CATEGORIES)} "
        f"--result-dir {root / 'export'} --score-dir {root / 'export' / 'score'} --partial-eval"
    )


def test_the_embedded_model_over_its_context_gives_inference_errors_an_export_and_the_command(
    bfcl: pytest.Pytester, selected
) -> None:
    pytest.importorskip("llama_cpp", reason="the embedded model needs llama-cpp-python")
    from pytest_agenteval.models import SamplerError
    from pytest_agenteval.models.backends.llama import embedded_model_path

    try:
        embedded_model_path()
    except SamplerError as exc:
        pytest.skip(f"the embedded model: {exc}")
    result = bfcl.runpytest(*SELECT, "--n-ctx=1024")  # every first prompt is ~8k tokens
    result.assert_outcomes(failed=4)  # unsolved: scored, none errored
    problems, (summary,) = read_results(bfcl.path / "r.jsonl")
    assert summary["problems"] == 4 and summary["errors"]["items"] == 0
    for entry, problem in zip(selected, problems, strict=True):
        (generation,) = problem["generations"]
        assert (problem["problem_id"], generation["error_type"]) == (entry.id, "multi_turn:inference_error")
        assert generation["stop_reason"] == "context_exceeded"
        error = generation["error_message"]
        assert re.fullmatch(
            r"context overflow: the prompt is \d+ tokens, over the context of 1024 tokens "
            r"\(llama\.cpp in-process, --n-ctx\)",
            error,
        )
        assert _exported(bfcl.path, entry.id, entry.category) == f"Error during inference: {error}"
    assert summary["bfcl_evaluate"] == _command(bfcl.path)
    # nothing was generated: the first request of each entry was refused before sampling
    assert summary["tokens"] == {"prompt": 0, "completion": 0}
    _official_agrees(bfcl.path)


def _official_agrees(root) -> None:
    """bfcl-eval's own evaluation reads the export and scores each entry wrong, as we do."""
    from tests.bfcl.official_evaluate import REQUIREMENTS, official_scores

    for module in REQUIREMENTS:
        pytest.importorskip(module, reason=f"the official evaluation needs {module}")
    official = official_scores(root / "export", EXPORT_MODEL, list(MULTI_TURN_CATEGORIES))
    counts = {c: (s["correct_count"], s["total_count"]) for c, s in official["categories"].items()}
    assert counts == {c: (0, 1) for c in MULTI_TURN_CATEGORIES}


# the refusal's wording is read by the sampler, in a worker as in one process: the llama.cpp
# style runs under xdist (the workers' spending summed by the controller), vLLM's in one
# process (two worker processes loading BFCL fewer)
@pytest.mark.parametrize(
    ("style", "workers"), [("llama-server", "2"), ("vllm", "0")], ids=["llama-server", "vllm"]
)
def test_a_server_refusing_the_grown_conversation_gives_inference_errors_and_counts_what_was_spent(
    bfcl: pytest.Pytester, selected, style: str, workers: str, small_bfcl_dir: Path
) -> None:
    """The first request of every entry fits; the conversation then outgrows the context."""
    first = max(estimate_prompt_tokens({"messages": prompt_messages(e)}) for e in selected)
    context = first + (1024 if style == "vllm" else 0) + 1  # vLLM counts --max-tokens in
    config = ServerConfig(script=GroundTruthModel(selected), context_tokens=context, context_style=style)
    # under xdist, each worker parses and collects a copy of each data file's first 5 entries
    # (the first of each category is selected), not all 10,306
    data = [f"--bfcl-data-dir={small_bfcl_dir}"] if workers != "0" else []
    with OpenAITestServer(config) as server:
        result = bfcl.runpytest(
            *SELECT,
            f"--endpoint={server.url}",
            "--model-name=mock-model",
            "--max-tokens=1024",
            "-n",
            workers,
            *data,
        )
        refused = [r for r in server.requests if r["outcome"] == "400"]
    result.assert_outcomes(failed=4)
    problems, (summary,) = read_results(bfcl.path / "r.jsonl")
    assert summary["problems"] == 4 and summary["errors"]["items"] == 0
    assert len(refused) == 4  # one refusal ends each entry, never retried
    generations = [p["generations"][0] for p in sorted(problems, key=lambda p: p["index"])]
    assert [g["error_type"] for g in generations] == ["multi_turn:inference_error"] * 4
    for entry, problem in zip(selected, problems, strict=True):
        error = problem["generations"][0]["error_message"]
        assert error.endswith(f"over the context of {context} tokens ({server.url}/chat/completions)")
        assert _exported(bfcl.path, entry.id, entry.category) == f"Error during inference: {error}"
    assert summary["bfcl_evaluate"] == _command(bfcl.path)
    # what the answered requests spent reaches the totals
    answered = [g for g in generations if g["turns"]]
    assert answered
    assert summary["tokens"]["prompt"] == sum(g["prompt_tokens"] for g in generations) > 0
    assert summary["tokens"]["completion"] == sum(g["completion_tokens"] for g in generations) > 0
    # every request sent, the refused one included (it read 'requests 0 sent' / 4 short)
    assert [g["attempts"] for g in generations] == [g["turns"] + 1 for g in generations]
    assert summary["requests"]["attempts"] == len(server.requests)
