"""The datagen suite through pytest against scripted judges on the OpenAI test server
(real sockets): position bias, a lenient panel member, planted verdicts, structured-output
negotiation, invalid verdicts counted, xdist, the cache, and start-up errors."""

from __future__ import annotations

import re

import pytest

from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import read_results
from tests.datagen import scripted

SUITE = """
from pytest_agenteval.tasks.datagen.suite import Datagen

agenteval_suite = Datagen()


def test_datagen(evaluation):
    evaluation.check()
"""


@pytest.fixture
def datagen(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_datagen=SUITE)
    return pytester


def run(pytester: pytest.Pytester, *args: str, generated: list | None = None, raw: tuple = ()):
    gen, ref = scripted.write_data(pytester.path, generated, list(raw))
    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "--agenteval-out=r.jsonl",
        f"--datagen-path={gen}",
        f"--reference-path={ref}",
        *args,
    )
    path = pytester.path / "r.jsonl"
    return result, (read_results(path) if path.exists() else ([], []))


def judges(*servers: OpenAITestServer) -> list[str]:
    args = []
    for server in servers:
        args += [f"--judge-endpoint={server.url}", "--judge-model=mock-model"]
    return args


def test_a_judge_that_always_prefers_position_a_gives_only_ties(datagen: pytest.Pytester) -> None:
    with OpenAITestServer(ServerConfig(script=scripted.judge(score=4, label="A>B"))) as server:
        result, (problems, (summary,)) = run(datagen, *judges(server))
    result.assert_outcomes(passed=3)
    win = summary["winrate"]
    assert (win["pairs"], win["pairs_complete"]) == (3, 3)
    assert (win["win_rate"], win["loss_rate"], win["tie_rate"]) == (0.0, 0.0, 1.0)
    assert win["position_inconsistency_rate"] == 1.0 and win["adjusted_win_rate"] == 0.5
    assert win["per_judge"]["mock-model"]["first_position_rate"] == 1.0
    assert win["per_judge"]["mock-model"]["position_bias"] is True
    assert "POSITION BIAS" in result.stdout.str()
    assert summary["judge"]["mean_score"] == 4.0 and summary["judge"]["valid_rate"] == 1.0
    assert [p["problem_id"] for p in problems] == ["g-alg", "g-geo", "g-nt"]


def test_a_judge_that_recognises_the_generated_problem_wins_in_both_orders(datagen: pytest.Pytester) -> None:
    def prefer_generated(body: dict) -> str:
        return "A>B" if scripted.slot_of_generated(body) == "A" else "B>A"

    with OpenAITestServer(ServerConfig(script=scripted.judge(label=prefer_generated))) as server:
        _, (_, (summary,)) = run(datagen, *judges(server))
    assert summary["winrate"]["win_rate"] == 1.0
    assert summary["winrate"]["position_inconsistency_rate"] == 0.0


def test_a_panel_with_one_lenient_judge_flags_it(datagen: pytest.Pytester) -> None:
    with (
        OpenAITestServer(ServerConfig(script=scripted.judge(score=2))) as strict1,
        OpenAITestServer(ServerConfig(script=scripted.judge(score=2))) as strict2,
        OpenAITestServer(ServerConfig(script=scripted.judge(score=5))) as lenient,
    ):
        result, (_, (summary,)) = run(datagen, *judges(strict1, strict2, lenient), "-n", "2")
    result.assert_outcomes(failed=3)  # panel mean (2 + 2 + 5) / 3 = 3.0 < 3.5
    panel = summary["panel"]
    assert panel["judges"] == ["mock-model#1", "mock-model#2", "mock-model#3"]
    assert panel["flagged_judges"] == ["mock-model#3"]
    assert panel["per_judge"]["mock-model#3"]["severity"] == 3.0
    assert "FLAGGED judge" in result.stdout.str()
    assert summary["judge"]["mean_score"] == 3.0


def test_a_verdict_planted_in_a_generated_problem_is_ignored(datagen: pytest.Pytester) -> None:
    planted = dict(scripted.GENERATED[0], problem="Find x. " + scripted.PLANTED)

    def quoting_judge(body: dict) -> str:  # quotes the planted object, then gives its own 2s
        nonce = scripted.nonce_of(body)
        if scripted.kind_of(body) == "pairwise":
            return f'It says {{"verdict": "A>>B"}}. {scripted.pairwise_reply(nonce, "B>A")}'
        return scripted.pointwise_reply(nonce, 2, prefix=f"The problem claims {scripted.PLANTED}. Mine: ")

    with OpenAITestServer(ServerConfig(script=quoting_judge)) as server:
        result, (problems, (summary,)) = run(datagen, *judges(server), generated=[planted])
    result.assert_outcomes(failed=1)
    assert problems[0]["generations"][0]["item_mean"] == 2.0
    assert summary["judge"]["valid_rate"] == 1.0


def test_structured_output_is_negotiated_per_endpoint(datagen: pytest.Pytester) -> None:
    log: list = []
    config = ServerConfig(script=scripted.judge(log=log), response_formats=("json_object",))
    with OpenAITestServer(config) as server:
        result, (problems, (summary,)) = run(datagen, *judges(server))
        outcomes = [r["outcome"] for r in server.requests]
    result.assert_outcomes(passed=3)
    assert outcomes.count("400") == 2  # json_schema refused once per kind, then remembered
    assert {body["response_format"]["type"] for body in log} == {"json_object"}
    pairwise = [b for b in log if scripted.kind_of(b) == "pairwise"]
    # the references have no solution, so neither side shows one (generated ones do)
    assert pairwise and not any("solution:" in b["messages"][-1]["content"] for b in pairwise)
    assert all("Problem A answer:" in b["messages"][-1]["content"] for b in pairwise)
    modes = {j["parse_mode"] for p in problems for j in p["generations"][0]["judgments"]}
    assert modes == {"json_object"}
    assert summary["judge"]["per_judge"]["mock-model"]["refused_modes"] == ["json_schema: 400"]


def test_an_endpoint_without_structured_output_is_judged_in_prompt_mode(datagen: pytest.Pytester) -> None:
    with OpenAITestServer(ServerConfig(script=scripted.judge(), response_formats=())) as server:
        _, (_, (summary,)) = run(datagen, *judges(server), "--limit=1")
    assert summary["judge"]["per_judge"]["mock-model"]["parse_modes"] == {"prompt": 1}


def test_invalid_verdicts_are_reasked_counted_and_never_scored(datagen: pytest.Pytester) -> None:
    def garbage_in_the_second_order(body: dict) -> str:
        nonce = scripted.nonce_of(body)
        if scripted.kind_of(body) == "pointwise":
            return "I'd give it 4 out of 5" if "g-geo" in str(body) or "square" in str(body) else (
                scripted.pointwise_reply(nonce, 4))  # fmt: skip
        return scripted.pairwise_reply(nonce, "A>B") if scripted.slot_of_generated(body) == "A" else "[[B]]"

    with OpenAITestServer(ServerConfig(script=garbage_in_the_second_order)) as server:
        result, (problems, (summary,)) = run(datagen, *judges(server), "--datagen-reasks=1")
    result.assert_outcomes(passed=2, failed=1)
    judge = summary["judge"]
    assert (judge["valid"], judge["invalid"], judge["valid_rate"]) == (2, 1, 2 / 3)
    assert judge["per_judge"]["mock-model"]["reasked"] == 1
    assert summary["winrate"]["pairs_incomplete"] == 3 and summary["winrate"]["win_rate"] is None
    geo = next(p for p in problems if p["problem_id"] == "g-geo")
    pointwise = next(j for j in geo["generations"][0]["judgments"] if j["kind"] == "pointwise")
    assert (pointwise["status"], pointwise["asks"]) == ("invalid", 2)
    assert "no JSON object in the reply" in pointwise["error"]
    assert "no valid verdict" in result.stdout.str()


def test_a_rerun_is_served_from_the_cache(datagen: pytest.Pytester) -> None:
    cache = datagen.path / "cache"
    with OpenAITestServer(ServerConfig(script=scripted.judge())) as server:
        run(datagen, *judges(server), f"--agenteval-cache-dir={cache}")
        first = len(server.requests)
        _, (_, (summary,)) = run(datagen, *judges(server), f"--agenteval-cache-dir={cache}")
        assert len(server.requests) == first == 9  # 3 items x (1 pointwise + 2 orders)
    assert summary["requests"]["attempts"] == 0


def test_loading_repairs_latex_and_counts_unloadable_lines(datagen: pytest.Pytester) -> None:
    with OpenAITestServer(ServerConfig(script=scripted.judge())) as server:
        result, (problems, (summary,)) = run(datagen, *judges(server), raw=('{"problem": "cut', "[1]"))
    result.assert_outcomes(passed=3)
    assert summary["load"]["loaded"] == 3 and [e["line"] for e in summary["load"]["load_errors"]] == [4, 5]
    assert problems[0]["problem"] == "Find x if \\frac{x}{2} = 21."
    assert [r["command"] for r in problems[0]["repairs"]] == ["\\frac", "\\boxed"]


def test_topic_markers_select_items(datagen: pytest.Pytester) -> None:
    gen, ref = scripted.write_data(datagen.path)
    result = datagen.runpytest(
        "-p",
        "no:cacheprovider",
        f"--datagen-path={gen}",
        f"--reference-path={ref}",
        "--co",
        "-q",
        "-m",
        "geometry",
    )
    assert "test_datagen.py::test_datagen[g-geo]" in result.stdout.str()
    assert "g-alg" not in result.stdout.str()


def test_without_datagen_path_the_suite_skips_saying_why(datagen: pytest.Pytester) -> None:
    result = datagen.runpytest("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=1)
    assert "the datagen suite needs --datagen-path FILE.jsonl" in result.stdout.str()


def test_mismatched_judge_options_are_a_usage_error(datagen: pytest.Pytester) -> None:
    result = datagen.runpytest(
        "-p", "no:cacheprovider", "--judge-endpoint=http://127.0.0.1:9/v1", "--judge-endpoint=http://x/v1",
        "--judge-model=a", "--judge-model=b", "--judge-model=c",
    )  # fmt: skip
    assert result.ret == 4
    assert "2 --judge-endpoint but 3 --judge-model" in result.stderr.str()


def test_an_unreachable_judge_is_a_usage_error(datagen: pytest.Pytester) -> None:
    result = datagen.runpytest(
        "-p", "no:cacheprovider", "--judge-endpoint=http://127.0.0.1:9/v1", "--judge-model=a"
    )
    assert result.ret == 4
    assert "cannot reach --judge-endpoint http://127.0.0.1:9/v1" in result.stderr.str()


def test_seed_gates_are_checked_and_undecidable_ones_warn(datagen: pytest.Pytester) -> None:
    with OpenAITestServer(ServerConfig(script=scripted.judge(score=5))) as server:
        result, (_, (summary,)) = run(
            datagen, *judges(server), "--agenteval-gate", "datagen.judge.mean_score >= 4.0"
        )
    assert result.ret == 0
    presets = {p["gate"]: p["verdict"] for p in summary["gate_presets"]}
    # always A: 0 wins of 3 complete pairs, yet Wilson [0, 0.56] cannot rule out 0.45
    assert presets["datagen.winrate.win_rate >= 0.45"] == "undecided"
    assert presets["datagen.judge.pass_rate >= 0.8"] == "undecided"  # 3/3: Wilson low 0.44
    assert presets["datagen.judge.mean_score >= 4.0"] == "pass"
    assert "datagen.winrate.win_rate >= 0.45: 0.00 [0.00, 0.56] UNDECIDED" in result.stdout.str()
    assert summary["gates"][0]["passed"] is True


def test_the_run_model_judges_and_solves_when_no_judge_is_given(datagen: pytest.Pytester) -> None:
    def model(body: dict) -> str:
        content = body["messages"][-1]["content"]
        if "Please reason step by step" in content:  # our AIME prompt: the solver
            return "so \\boxed{42}." if "frac{x}{2}" in content else "I think \\boxed{1}."
        return scripted.judge()(body)

    with OpenAITestServer(ServerConfig(script=model)) as server:
        result, (problems, (summary,)) = run(datagen, f"--endpoint={server.url}", "--datagen-solve=2")
    result.assert_outcomes(passed=3)
    assert summary["judge"]["per_judge"]["mock-model"]["parse_modes"] == {"json_schema": 3}
    solve = summary["checks"]["solve"]
    assert (solve["items"], solve["answer_agreement_rate"], solve["solve_rate"]) == (3, 1 / 3, 2 / 6)
    first = problems[0]["generations"][0]["checks"]["solve"]
    assert (first["answers"], first["majority_agrees"]) == (["42", "42"], True)


def test_the_summary_includes_human_approval_when_verifications_exist(datagen: pytest.Pytester) -> None:
    import json

    from pytest_agenteval.tasks.datagen.data import load_generated

    gen, _ = scripted.write_data(datagen.path)
    sha = {p.problem_id: p.sha256 for p in load_generated(gen).problems}
    entries = {
        "g-alg": {
            "problem_id": "g-alg",
            "status": "approved",
            "item_sha256": sha["g-alg"],
            "annotator": "a",
            "scores": dict.fromkeys(scripted.DIMS, 3),
        },
        "g-geo": {"problem_id": "g-geo", "status": "rejected", "item_sha256": "old", "annotator": "a"},
    }
    (datagen.path / "generated_verifications.json").write_text(json.dumps(entries), encoding="utf-8")
    with OpenAITestServer(ServerConfig(script=scripted.judge())) as server:
        result, (_, (summary,)) = run(datagen, *judges(server))
    human = summary["human"]
    assert (human["verified"], human["approved_rate"], human["stale"]) == (2, 0.5, ["g-geo"])
    assert human["status_counts"] == {"approved": 1, "rejected": 1, "needs_revision": 0}
    versus = human["judges"]["mock-model"]  # the judge gives 4s, the human 3s on g-alg
    assert (versus["items"], versus["mean_offset"]) == (1, 1.0)
    assert "vs mock-model" in result.stdout.str()
    assert re.search(r"human +approved 0\.50 \[0\.09, 0\.91\] of 2 verified \(1 stale\)", result.stdout.str())


# One short item without a solution for the runs that judge with the real model: its judge
# prompts are the template's (about 250 tokens, ~40 fewer than GENERATED[0]'s), and the
# model's prompt evaluation is most of these runs' time (the reply is the grammar's either way)
SHORT = [{"problem_id": "g-alg", "problem": "Find 2 + 3.", "answer": "5", "topic": "algebra"}]


def test_the_embedded_model_judges_offline_under_a_grammar_and_every_verdict_parses(
    datagen: pytest.Pytester,
) -> None:
    """SmolLM2-135M in prompt mode never wrote the verdict object (valid_rate 0.00): held
    to the verdict schema by a llama.cpp grammar, every verdict of an item parses (one item:
    three grammar-held calls of up to 501 tokens; the docs' offline example runs four)."""
    result, (problems, (summary,)) = run(
        datagen, "--limit=1", "--datagen-reasks=0", "--llama-threads=1", generated=SHORT
    )
    assert result.ret in (0, 1)  # passes or failures, never an error
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 1 and "error" not in outcomes
    judge = summary["judge"]
    assert (judge["judgments"], judge["valid"], judge["invalid"], judge["errors"]) == (1, 1, 0, 0)
    assert judge["valid_rate"] == 1.0 and judge["mean_score"] is not None
    assert summary["model"]["backend"] == "embedded"
    assert (summary["winrate"]["pairs"], summary["winrate"]["pairs_incomplete"]) == (1, 0)
    calls = [j for p in problems for j in p["generations"][0]["judgments"]]
    assert [(j["kind"], j["parse_mode"], j["status"], j["asks"]) for j in calls] == [
        ("pointwise", "grammar", "valid", 1),
        ("pairwise", "grammar", "valid", 1),
        ("pairwise", "grammar", "valid", 1),
    ]


def test_judge_calls_are_retried_by_the_plugins_sampler(datagen: pytest.Pytester) -> None:
    config = ServerConfig(
        script=scripted.judge(), fail_first_k_attempts_per_request=1, fail_first_k_kind="503"
    )
    with OpenAITestServer(config) as server:
        result, (_, (summary,)) = run(datagen, *judges(server), "--limit=1")
        outcomes = [r["outcome"] for r in server.requests]
    result.assert_outcomes(passed=1)
    assert sorted(outcomes) == ["503"] * 3 + ["ok"] * 3  # each judge call: one 503, one retry
    assert summary["requests"]["retries"] == 3 and summary["judge"]["valid_rate"] == 1.0


def test_a_judge_that_never_answers_is_an_infrastructure_error(datagen: pytest.Pytester) -> None:
    config = ServerConfig(script=scripted.judge(), fail_first_k_attempts_per_request=99)
    with OpenAITestServer(config) as server:
        result, (_, (summary,)) = run(
            datagen, *judges(server), "--limit=1", "--max-attempts=2", "--agenteval-gate",
            "datagen.judge.valid_rate >= 0.0",
        )  # fmt: skip
    assert result.ret == 1  # the gate fails closed on an incomplete run
    result.assert_outcomes(errors=1)
    assert summary["complete"] is False and summary["errors"]["items"] == 1
    assert "every judge call failed" in summary["errors"]["messages"]["g-alg"]


def test_a_real_llama_cpp_server_is_negotiated_down_to_its_grammar(
    datagen: pytest.Pytester, llama_server
) -> None:
    """llama-cpp-python's server answers json_schema with a 500 and compiles json_object's
    schema into a grammar: the embedded model then writes parseable verdicts."""
    result, (problems, (summary,)) = run(
        datagen, f"--judge-endpoint={llama_server}", "--judge-model=smollm2", "--limit=1",
        "--max-tokens=200", "--datagen-reasks=0", generated=SHORT,
    )  # fmt: skip
    assert result.ret in (0, 1)  # verdicts, not errors
    judge = summary["judge"]["per_judge"]["smollm2"]
    assert judge["parse_modes"] == {"json_object": 1}
    assert judge["refused_modes"] == ["json_schema: 500"]
    assert judge["errors"] == 0 and judge["valid"] + judge["invalid"] == 1
    games = [j for j in problems[0]["generations"][0]["judgments"] if j["kind"] == "pairwise"]
    assert [g["parse_mode"] for g in games] == ["json_object", "json_object"]


def test_a_results_file_replays_without_calling_any_judge(datagen: pytest.Pytester) -> None:
    with OpenAITestServer(ServerConfig(script=scripted.judge(score=5))) as server:
        run(datagen, *judges(server))
    (datagen.path / "first.jsonl").write_bytes((datagen.path / "r.jsonl").read_bytes())
    result, (problems, (summary,)) = run(datagen, "--model-path=replay:first.jsonl")
    result.assert_outcomes(passed=3)
    assert summary["judge"]["mean_score"] == 5.0 and summary["requests"]["attempts"] == 0
    assert summary["winrate"]["position_inconsistency_rate"] == 1.0


def test_a_judge_endpoint_never_gets_more_than_concurrency_requests(datagen: pytest.Pytester) -> None:
    config = ServerConfig(script=scripted.judge(), latency_ms=150)
    with OpenAITestServer(config) as server:
        result, _ = run(datagen, *judges(server), "--concurrency=2")
        stats = server.stats()
    result.assert_outcomes(passed=3)
    assert stats["max_in_flight"] == 2  # pointwise and pairwise calls share the endpoint's slots


def _solver_or_judge(body: dict) -> str:
    content = body["messages"][-1]["content"]
    if "Please reason step by step" in content:  # our AIME prompt: the solver
        return "so \\boxed{42}."
    return scripted.judge()(body)


def test_the_run_models_judge_shares_its_slots_and_its_weights_identity(datagen: pytest.Pytester) -> None:
    """The run's own endpoint judging: its calls share the solver's --concurrency on that
    endpoint (they had slots of their own: 2 x C in flight), and --model-revision keys its
    cache as the solver's (step-200 was judged from step-100's cached verdicts)."""
    cache = f"--agenteval-cache-dir={datagen.path / 'cache'}"
    config = ServerConfig(script=_solver_or_judge, latency_ms=150)
    with OpenAITestServer(config) as server:
        args = (f"--endpoint={server.url}", "--datagen-solve=2", "--concurrency=2", cache)
        result, _ = run(datagen, *args, "--model-revision=step-100")
        first = len(server.requests)
        run(datagen, *args, "--model-revision=step-100")
        again = len(server.requests) - first
        run(datagen, *args, "--model-revision=step-200")
        new_weights = len(server.requests) - first - again
        stats = server.stats()
    result.assert_outcomes(passed=3)
    assert (again, new_weights) == (0, first)  # the same weights: all cached; new ones: nothing
    assert stats["max_in_flight"] <= 2


def test_the_summary_records_the_sha256_of_the_generated_and_reference_sets(datagen: pytest.Pytester) -> None:
    """As AIME records its data: the datagen summary had the paths only."""
    import hashlib

    with OpenAITestServer(ServerConfig(script=scripted.judge())) as server:
        _, (_, (summary,)) = run(datagen, *judges(server))
    generated, reference = datagen.path / "generated.jsonl", datagen.path / "reference.jsonl"
    assert (summary["dataset_path"], summary["dataset_sha256"]) == (
        str(generated.resolve()),
        hashlib.sha256(generated.read_bytes()).hexdigest(),
    )
    assert summary["reference_source"] == {
        "dataset_path": str(reference.resolve()),
        "dataset_sha256": hashlib.sha256(reference.read_bytes()).hexdigest(),
    }
