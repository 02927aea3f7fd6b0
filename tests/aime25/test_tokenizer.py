"""`--tokenizer PATH`: a tokenizer.json with its chat template, counting for endpoints that
have no tokenize route. The tokenizer here is one we build: one token per character, the
ChatML markers as single special tokens, so every count can be checked by hand."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pytest_agenteval.models.tokens.template import TemplateError, next_prompt_tokens, tokenizer_from_file
from pytest_agenteval.testing import OpenAITestServer, Reply, ScriptedToolModel, ServerConfig
from tests.conftest import read_results

CHATML = (
    "{% if tools %}<|im_start|>system\n<tools>{{ tools | tojson }}</tools><|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|im_start|>", "<|im_end|>"]


@pytest.fixture
def char_tokenizer(tmp_path: Path) -> Path:
    tokenizers = pytest.importorskip("tokenizers", reason="the tokenizer extra is not installed")
    vocab = {"[UNK]": 0, **{token: i + 1 for i, token in enumerate(SPECIALS)}}
    for code in [10, *range(32, 127), 0xE9]:
        vocab[chr(code)] = len(vocab)
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Split(tokenizers.Regex("[\\s\\S]"), "isolated")
    tokenizer.decoder = tokenizers.decoders.Fuse()
    tokenizer.add_special_tokens(SPECIALS)
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    config = {"chat_template": CHATML, "eos_token": "<|im_end|>"}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return tmp_path


def test_counts_and_renders_with_the_file_s_tokenizer_and_template(char_tokenizer: Path) -> None:
    chat = tokenizer_from_file(char_tokenizer / "tokenizer.json")
    assert chat.count("abc") == 3 and chat.count("<|im_end|>") == 1 and chat.eos_token == "<|im_end|>"
    ids = chat.render([{"role": "user", "content": "hi"}], None, True)
    assert len(ids) == 1 + len("user\nhi") + 1 + 1 + 1 + len("assistant\n")
    assert chat.decode(ids) == "user\nhi\nassistant\n"  # special tokens skipped


def test_token_in_token_out_continuation_on_the_file_s_tokenizer(char_tokenizer: Path) -> None:
    chat = tokenizer_from_file(char_tokenizer)
    before = [{"role": "user", "content": "q"}]
    prompt = chat.render(before, None, True)
    sampled = chat.encode("call") + chat.encode("<|im_end|>")  # the sampler returned the end
    tool = {"role": "tool", "content": "42"}
    assert asyncio.run(next_prompt_tokens(chat, None, before, prompt, sampled, tool)) == (
        chat.render([*before, {"role": "assistant", "content": "call"}, tool], None, True)
    )


def test_a_template_that_rewrites_history_cannot_continue_token_by_token(char_tokenizer: Path) -> None:
    config = {
        "chat_template": "{% for m in messages %}{{ m.content | upper }}{% endfor %}{{ messages | length }}"
    }
    (char_tokenizer / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    chat = tokenizer_from_file(char_tokenizer)
    with pytest.raises(TemplateError, match="token-in/token-out continuation is impossible"):
        asyncio.run(
            next_prompt_tokens(
                chat, None, [{"role": "user", "content": "q"}], [], [], {"role": "tool", "content": "1"}
            )
        )


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        ("missing", "no tokenizer.json there; give the file or its folder"),
        ("no-template", "no chat template (tokenizer_config.json `chat_template` or chat_template.jinja)"),
    ],
)
def test_bad_tokenizer_paths_say_what_to_fix(char_tokenizer: Path, layout: str, message: str) -> None:
    if layout == "missing":
        target = char_tokenizer / "nowhere"
    else:
        (char_tokenizer / "tokenizer_config.json").write_text("{}", encoding="utf-8")
        target = char_tokenizer
    with pytest.raises(ValueError, match="--tokenizer") as error:
        tokenizer_from_file(target)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_an_endpoint_without_tokenize_counts_with_the_given_tokenizer(
    run_suite, char_tokenizer: Path
) -> None:
    turns = [
        Reply(
            tool_calls=[
                {"name": "code_interpreter", "arguments": {"code": "print('x' * 3000)\nprint('end')"}}
            ]
        ),
        "\\boxed{70}",
    ]
    with OpenAITestServer(ServerConfig(script=ScriptedToolModel(turns))) as server:
        result, out = run_suite(
            f"--endpoint={server.url}", "--mode=retool", "--limit=1", "--val-n=1",
            f"--tokenizer={char_tokenizer}", "--max-tool-response-tokens=100",
        )  # fmt: skip
    result.assert_outcomes(passed=1)
    (problem,), (summary,) = read_results(out)
    tool = problem["generations"][0]["transcript"][1]
    assert tool["output"].endswith("end\n") and 70 <= len(tool["output"]) <= 100
    assert summary["token_counting"] == {f"tokenizer file {char_tokenizer / 'tokenizer.json'}": 1}


def test_a_bad_tokenizer_stops_the_run_at_start_up(run_suite, tmp_path: Path) -> None:
    result, _ = run_suite("--endpoint=http://127.0.0.1:9/v1", f"--tokenizer={tmp_path / 'none'}")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--tokenizer *none: no tokenizer.json there; give the file or its folder*"])


QWEN_LIKE = (
    "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- if messages[0]['role'] == 'system' %}"
    "{{- messages[0]['content'] }}{%- else %}{{- 'You are a helpful assistant.' }}{%- endif %}"
    '{{- "\\n\\n# Tools\\n\\n<tools>" }}{%- for tool in tools %}{{- "\\n" }}{{- tool | tojson }}{%- endfor %}'
    '{{- "\\n</tools><|im_end|>\\n" }}{%- endif %}'
    "{%- for message in messages %}{%- if message.role == 'system' and loop.first and tools %}{%- continue %}"
    "{%- endif %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}{%- endif %}"
)


def test_a_tools_template_renders_as_transformers_does() -> None:
    # transformers' own tojson: keys in the schema's order, nothing HTML-escaped; loop
    # controls on; thinking off
    from pytest_agenteval.models.tokens.template import render_chat_template
    from pytest_agenteval.tasks.aime25 import CODE_TOOL, SYSTEM_PROMPT
    from pytest_agenteval.tasks.aime25._protocol import initial_messages

    text = render_chat_template(QWEN_LIKE, initial_messages("Q"), tools=[CODE_TOOL])
    assert text == (
        f"<|im_start|>system\n{SYSTEM_PROMPT}\n\n# Tools\n\n<tools>\n"
        f"{json.dumps(CODE_TOOL, ensure_ascii=False)}"
        "\n</tools><|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )


def test_a_broken_tokenizer_file_is_one_line(char_tokenizer: Path) -> None:
    (char_tokenizer / "tokenizer.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="is not a tokenizer.json") as error:
        tokenizer_from_file(char_tokenizer)
    assert "\n" not in str(error.value)


def test_token_continuation_needs_a_tokenize_route_at_start_up(run_suite) -> None:
    with OpenAITestServer(ServerConfig(tokenize="llama")) as server:
        result, _ = run_suite(f"--endpoint={server.url}", "--mode=retool", "--continuation=tokens")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--continuation tokens: * has no /tokenize that renders messages*"])
