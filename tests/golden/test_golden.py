"""Golden tests, one per shipped suite (issue 33): recorded generations (`replay:`; datagen's
judges: a scripted judge on the test server) scored and summarized by the plugin, compared
with a stored file of per-problem verdicts, prompt hashes and the summary's metrics. A
change to a prompt, a scorer or a metric fails here until the suite's `version` is bumped
and the file is regenerated, with one command:

    AGENTEVAL_GOLDEN=regenerate python -m pytest tests/golden -p no:cacheprovider

Regenerating refuses a changed output under an unchanged version: bump it first. A change
to a golden run's own inputs (replay texts, options) is no suite change: delete the suite's
file, then regenerate. AIME25's file covers both modes and fingerprints what each sent."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.tasks.registry import BUILTIN_SUITES
from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import TINY_PROBLEMS, read_results, write_jsonl

HERE = Path(__file__).parent
REGENERATE = os.environ.get("AGENTEVAL_GOLDEN") == "regenerate"
COMMAND = "AGENTEVAL_GOLDEN=regenerate python -m pytest tests/golden -p no:cacheprovider"
# What a summary holds about the run rather than about the suite's metrics
RUN_FIELDS = frozenset(
    {
        "dataset",
        "dataset_path",
        "base_model",
        "model_path",
        "model",
        "tokens",
        "length",
        "requests",
        "cost",
        "backend",
        "concurrency",
        "storage",
        "stalls",
        "config",
        "workers",
        "versions",
        "scorer_version",
        "harness",
        "started_at",
        "finished_at",
        "duration_s",
        "gates",
        "compare",
        "sandbox",
        "export",
        "submission",
        "judges",
    }
)
GENERATION_FIELDS = ("correct", "answer", "error_type")


def _suite_class(name: str) -> type:
    import importlib

    module, _, attribute = BUILTIN_SUITES[name].partition(":")
    return getattr(importlib.import_module(module), attribute)


def golden_of(out: Path, judged: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """What the file stores of one run: per problem its prompt hash and each generation's
    verdict, and the summary less what describes the run rather than the metrics."""
    problems, (summary,) = read_results(out)
    fields = _suite_class(summary["suite"]).score_fields
    data = {
        "suite": summary["suite"],
        "suite_version": summary["suite_version"],
        "problems": {
            str(p["problem_id"]): {
                "prompt_hash": p["prompt_hash"],
                "generations": [
                    {k: g[k] for k in (*GENERATION_FIELDS, *fields) if k in g and k != "text"}
                    for g in p["generations"]
                ],
            }
            for p in problems
        },
        "summary": {k: v for k, v in summary.items() if k not in RUN_FIELDS},
    }
    if judged is not None:  # datagen: what its judges were asked (their prompts, less the nonces)
        nonce = re.compile(r"\b[0-9a-f]{16}\b")  # fresh each run without a cache (tasks/datagen/_judge.py)
        asked = sorted(nonce.sub("<nonce>", json.dumps(body["messages"], sort_keys=True)) for body in judged)
        data["judge_prompts_sha256"] = hashlib.sha256("\n".join(asked).encode()).hexdigest()
    text = json.dumps(data, sort_keys=True).replace(str(out.parent), "<run folder>")
    return json.loads(text)  # as the file reads back


def _first_difference(stored: Any, current: Any, where: str = "") -> str:
    if isinstance(stored, dict) and isinstance(current, dict):
        for key in sorted(set(stored) | set(current)):
            if stored.get(key) != current.get(key):
                return _first_difference(stored.get(key), current.get(key), f"{where}.{key}")
    if isinstance(stored, list) and isinstance(current, list) and len(stored) == len(current):
        for i, (a, b) in enumerate(zip(stored, current, strict=True)):
            if a != b:
                return _first_difference(a, b, f"{where}[{i}]")
    return f"{where.lstrip('.')}: stored {json.dumps(stored)[:200]}, now {json.dumps(current)[:200]}"


def check_golden(current: dict[str, Any]) -> None:
    name, version = current["suite"], current["suite_version"]
    path = HERE / f"{name}.json"
    stored = json.loads(path.read_text(encoding="utf-8")) if path.exists() else None
    changed = stored is not None and {**stored, "suite_version": version} != current
    if REGENERATE:
        if changed and stored["suite_version"] == version:
            pytest.fail(
                f"{name}: the output changed ({_first_difference(stored, current)}) but its version is "
                f"still {version}: bump {_suite_class(name).__name__}.version, then regenerate"
            )
        path.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        return
    assert stored is not None, f"no golden file {path}: make it with {COMMAND}"
    assert stored["suite_version"] == version, (
        f"{name} is version {version}, its golden file version {stored['suite_version']}: regenerate it "
        f"with {COMMAND}"
    )
    assert not changed, (
        f"{name} version {version} gives other verdicts or metrics than its golden file: "
        f"{_first_difference(stored, current)}. A change to its prompt, scorer or metrics needs a new "
        f"version: bump {_suite_class(name).__name__}.version and regenerate with {COMMAND}"
    )


def _run(pytester: pytest.Pytester, suite: str, *args: str) -> Path:
    result = pytester.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        "--pyargs",
        f"pytest_agenteval.suites.{suite}",
        "--agenteval-out=r.jsonl",
        *args,
    )
    assert result.ret in (0, 1), result.stdout.str()[-2000:]
    return pytester.path / "r.jsonl"


def aime25(pytester: pytest.Pytester) -> dict[str, Any]:
    """Both modes: text-only replayed (the integer rule), ReTool replayed (the reward rule on
    the answer's last 300 characters, math-verify), ReTool live against a scripted model that
    calls the code tool once (the protocol, the sandbox's observation, the turns), and what each
    mode sent: its system prompt, tool schema and messages, as the server received them."""
    from pytest_agenteval.testing import Reply, ScriptedToolModel

    data = write_jsonl(pytester.path / "problems.jsonl", TINY_PROBLEMS)
    replayed = (f"--dataset-path={data}", "--val-n=3")
    golden = golden_of(
        _run(
            pytester,
            "aime25",
            *replayed,
            f"--model-path=replay:{HERE / 'aime25.replay.jsonl'}",
            "--mode=text-only",
        )
    )
    retool = golden_of(
        _run(
            pytester,
            "aime25",
            *replayed,
            f"--model-path=replay:{HERE / 'aime25.retool.replay.jsonl'}",
            "--mode=retool",
        )
    )
    golden["retool"] = {"problems": retool["problems"], "summary": retool["summary"]}

    calls = ScriptedToolModel(
        [
            Reply(
                text="Let me compute.",
                tool_calls=[{"name": "code_interpreter", "arguments": {"code": "print(30 + 40)"}}],
            ),
            lambda observation, body: (
                f"The tool printed {observation.strip()}, so \\boxed{{{observation.strip()}}}."
            ),
        ]
    )
    asked: dict[str, list[dict[str, Any]]] = {"text-only": [], "retool": []}

    def model(body: dict[str, Any]) -> Any:
        asked["retool" if body.get("tools") else "text-only"].append(body)
        return calls(body) if body.get("tools") else "So \\boxed{70}."

    live = (
        f"--dataset-path={data}",
        "--limit=1",
        "--val-n=1",
        "--agenteval-no-cache",
        "--sandbox-timeout=10",
    )
    with OpenAITestServer(ServerConfig(script=model)) as server:
        _run(pytester, "aime25", *live, f"--endpoint={server.url}", "--mode=text-only")
        out = _run(pytester, "aime25", *live, f"--endpoint={server.url}", "--mode=retool")
    (problem,), _ = read_results(out)
    golden["retool_tool_calls"] = {
        "generations": [
            {
                **{
                    k: g[k]
                    for k in ("correct", "answer", "stop_reason", "code_calls", "turns", "predicted_answer")
                },
                "transcript": [
                    [e["role"], e.get("action"), e.get("status"), e.get("output")] for e in g["transcript"]
                ],
            }
            for g in problem["generations"]
        ],
    }
    golden["prompts_sha256"] = {mode: _prompts_sha256(bodies) for mode, bodies in sorted(asked.items())}
    return golden


def _prompts_sha256(bodies: list[dict[str, Any]]) -> str:
    """What a mode sends, less what varies with the run (seeds, token budgets): every
    request's messages and tools."""
    sent = sorted(
        json.dumps({"messages": b["messages"], "tools": b.get("tools")}, sort_keys=True) for b in bodies
    )
    assert sent, "the mode sent no request"
    return hashlib.sha256("\n".join(sent).encode()).hexdigest()


def bfcl(pytester: pytest.Pytester) -> dict[str, Any]:
    pytest.importorskip("tree_sitter", reason="BFCL needs: pip install -e '.[bfcl]'")
    replay = HERE / "bfcl.replay.jsonl"  # the first 3 of each category selected
    selected = ("-m", "non_live and (simple_python or parallel or irrelevance)", "--limit-per-category=3")
    return golden_of(_run(pytester, "bfcl", f"--model-path=replay:{replay}", *selected))


def gaia(pytester: pytest.Pytester) -> dict[str, Any]:
    from tests.gaia import make_synthetic

    root = make_synthetic.make_synthetic_gaia(pytester.path / "GAIA", "jsonl")
    replay = make_synthetic.write_replay(pytester.path / "replay.jsonl")
    return golden_of(_run(pytester, "gaia", f"--gaia-path={root}", f"--model-path=replay:{replay}"))


def datagen(pytester: pytest.Pytester) -> dict[str, Any]:
    from tests.datagen import scripted

    def prefer_generated(body: dict) -> str:
        return "A>B" if scripted.slot_of_generated(body) == "A" else "B=A"

    asked: list[dict[str, Any]] = []
    gen, ref = scripted.write_data(pytester.path)
    config = ServerConfig(script=scripted.judge(score=4, label=prefer_generated, log=asked))
    with OpenAITestServer(config) as server:
        out = _run(
            pytester,
            "datagen",
            f"--datagen-path={gen}",
            f"--reference-path={ref}",
            f"--judge-endpoint={server.url}",
            "--judge-model=mock-model",
            "--agenteval-no-cache",
        )
    return golden_of(out, asked)


RUNS: dict[str, Callable[[pytest.Pytester], dict[str, Any]]] = {
    "aime25": aime25,
    "bfcl": bfcl,
    "gaia": gaia,
    "datagen": datagen,
}


@pytest.mark.parametrize("suite", sorted(RUNS))
def test_the_suite_gives_its_golden_verdicts_and_metrics(pytester: pytest.Pytester, suite: str) -> None:
    check_golden(RUNS[suite](pytester))


def test_every_shipped_suite_has_a_golden_test() -> None:
    assert set(RUNS) == set(BUILTIN_SUITES)
