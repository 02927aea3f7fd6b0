"""Retool on real models: the embedded GGUF in process (token-in/token-out, its own
tokenizer) and a real `python -m llama_cpp.server` (its /extras/tokenize), with every
budget decision on real token counts, as the summary says."""

from __future__ import annotations

from pytest_agenteval.tasks.aime25._conversation import TOOLS
from pytest_agenteval.tasks.aime25._protocol import initial_messages
from tests.conftest import read_results


def test_embedded_retool_is_the_default_and_counts_the_model_s_own_tokens(
    aime_suite, tiny_aime, embedded_sampler
):
    result = aime_suite.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--dataset-path={tiny_aime}", "--agenteval-out=r.jsonl",
        "--limit=1", "--val-n=2", "--max-assistant-tokens=24",
    )  # fmt: skip
    assert result.ret in (0, 1)
    (problem,), (summary,) = read_results(aime_suite.path / "r.jsonl")
    assert (summary["mode"], summary["scorer"]) == ("retool", "math-verify-tail")
    assert summary["continuation"] == {"tokens": 2}
    assert summary["token_counting"] == {"the model's own tokenizer (GGUF vocabulary and chat template)": 2}
    prompt = embedded_sampler.chat_tokenizer().render(initial_messages("What is 30 + 40?"), TOOLS, True)
    for generation in problem["generations"]:
        first = generation["transcript"][0]
        assert first["prompt_tokens"] == len(prompt) and 0 < first["completion_tokens"] <= 24
        assert generation["completion_tokens"] == sum(
            t["completion_tokens"] for t in generation["transcript"] if t["role"] == "assistant"
        )


def test_llama_cpp_server_retool_counts_with_its_tokenizer(run_suite, llama_server: str) -> None:
    result, out = run_suite(
        f"--endpoint={llama_server}", "--mode=retool", "--limit=1", "--val-n=2",
        "--max-assistant-tokens=24", "--max-trajectory-tokens=1500",
    )  # fmt: skip
    assert result.ret in (0, 1)
    (problem,), (summary,) = read_results(out)
    label = "the server's /extras/tokenize (text; chat framing from server usage)"
    assert summary["token_counting"] == {label: 2} and summary["continuation"] == {"messages": 2}
    assert all(g["transcript"][0]["prompt_tokens"] > 0 for g in problem["generations"])
