"""In-process llama.cpp (the embedded SmolLM2 GGUF) and the split every text-producing
backend shares (models/reasoning.py): --thinking reaches the chat template, the tags come
from the template (or --think-tags), and the reasoning's tokens are counted exactly with
the model's own vocabulary. SmolLM2 does not think: a template that opens a think block
in the prompt makes every reply it cuts off unclosed reasoning."""

from __future__ import annotations

import asyncio

import pytest

from pytest_agenteval.api.sampler import Completion
from pytest_agenteval.models import LlamaSampler, SamplingParams, embedded_model_path
from pytest_agenteval.models.reasoning import ThinkSplit, template_think_tags

# ChatML as SmolLM2's, plus Qwen3's thinking switch: the generation prompt opens the block
THINK_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n"
    "{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}"
    "{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking %}<think>\n{% endif %}{% endif %}"
)
MESSAGES = [{"role": "user", "content": "What is 30 + 40?"}]
EIGHT = SamplingParams(temperature=0.0, top_p=1.0, top_k=-1, max_tokens=8, seed=0)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        (THINK_TEMPLATE, ("<think>", "</think>")),
        ("{{ '<seed:think>' }}...{{ '</seed:think>' }}", ("<seed:think>", "</seed:think>")),
        ("[THINK]{{ x }}[/THINK]", ("[THINK]", "[/THINK]")),
        ("<|START_THINKING|>{{ x }}<|END_THINKING|>", ("<|START_THINKING|>", "<|END_THINKING|>")),
        ("<|im_start|>assistant\n", None),
        (None, None),
    ],
)
def test_the_tags_come_from_the_template(template: str | None, expected: tuple[str, str] | None) -> None:
    assert template_think_tags(template) == expected


@pytest.mark.parametrize(
    ("split", "text", "finish", "expected"),
    [
        # the template writes no tags: its prompt opened nothing, a cut-off reply is an answer
        (ThinkSplit(thinking="on").with_template("<|im_start|>"), "abc", "length", ("abc", None, True, 0)),
        # the template opened the block (thinking on): no closing tag, however it ended, is unclosed
        (ThinkSplit(thinking="on").with_template(THINK_TEMPLATE), "abc", "length", ("", "abc", False, 10)),
        (ThinkSplit(thinking="on").with_template(THINK_TEMPLATE), "abc", "stop", ("", "abc", False, 10)),
        (
            ThinkSplit(thinking="on").with_template(THINK_TEMPLATE),
            "ab</think>c",
            "stop",
            ("c", "ab", True, 2),
        ),
        (ThinkSplit(thinking="off").with_template(THINK_TEMPLATE), "abc", "length", ("abc", None, True, 0)),
        # an endpoint (its prompt not known): cut off without tags under --thinking on is unclosed
        (ThinkSplit(thinking="on"), "abc", "length", ("", "abc", False, 10)),
        (ThinkSplit(thinking="on"), "abc", "stop", ("abc", None, True, 0)),
        # --think-tags wins over the template's
        (ThinkSplit(("[T]", "[/T]")).with_template(THINK_TEMPLATE), "[T]a[/T]b", "stop", ("b", "a", True, 1)),
        (ThinkSplit().with_template(THINK_TEMPLATE), "<think>ab</think>c", "stop", ("c", "ab", True, 2)),
    ],
)
def test_the_split_of_a_completion(split: ThinkSplit, text: str, finish: str, expected: tuple) -> None:
    done = split.apply(Completion(text, finish, completion_tokens=10), count_tokens=len)
    assert (done.text, done.reasoning, done.reasoning_closed, done.reasoning_tokens) == expected
    assert done.reasoning_tokens_estimated is False


@pytest.mark.parametrize(
    ("text", "finish", "tokens", "expected"),
    [
        ("<think>abcdef</think>ab", "stop", 10, (8, True)),  # 10 * 6/8 = 7.5: rounded to 8
        ("<think>abcdef</think>ab", "stop", None, (None, False)),  # one of n: unknown
        ("<think>abcdef", "length", 10, (10, False)),  # never closed: every token is reasoning
        ("ab", "stop", 10, (0, False)),  # no reasoning: none of them
    ],
)
def test_without_a_tokenizer_the_count_is_an_estimate_and_says_so(text, finish, tokens, expected) -> None:
    done = ThinkSplit().apply(Completion(text, finish, completion_tokens=tokens))
    assert (done.reasoning_tokens, done.reasoning_tokens_estimated) == expected


def test_a_reported_count_is_kept() -> None:
    done = ThinkSplit().apply(
        Completion("<think>abcdef</think>ab", "stop", completion_tokens=10, reasoning_tokens=3)
    )
    assert (done.reasoning_tokens, done.reasoning_tokens_estimated) == (3, False)


@pytest.fixture(scope="module")
def embedded() -> LlamaSampler:
    sampler = LlamaSampler(embedded_model_path(), embedded=True, n_threads=1)
    sampler._load()
    return sampler


def _with_template(base: LlamaSampler, thinking: str) -> LlamaSampler:
    """The embedded model, with a template that thinks (the GGUF's own does not)."""
    sampler = LlamaSampler(
        embedded_model_path(), embedded=True, n_threads=1, think=ThinkSplit(thinking=thinking)
    )
    sampler._llm, sampler._vocab = base._load(), base._vocab_model()  # one copy of the weights
    sampler.chat_tokenizer().template = THINK_TEMPLATE
    return sampler


def test_thinking_on_opens_the_block_and_a_cut_off_reply_is_unclosed_reasoning(
    embedded: LlamaSampler,
) -> None:
    sampler = _with_template(embedded, "on")
    prompt = sampler.chat_tokenizer().render(MESSAGES)
    assert sampler._decode(prompt).endswith(
        "What is 30 + 40?\nassistant\n<think>\n"
    )  # special tokens not decoded
    done = asyncio.run(sampler.complete(MESSAGES, EIGHT))
    assert (done.text, done.finish_reason, done.reasoning_closed) == ("", "length", False)
    assert done.reasoning == sampler._decode(done.token_ids) and done.reasoning
    assert (done.reasoning_tokens, done.completion_tokens, done.reasoning_tokens_estimated) == (8, 8, False)


def test_thinking_off_renders_no_block_and_the_reply_is_the_answer(embedded: LlamaSampler) -> None:
    sampler = _with_template(embedded, "off")
    assert sampler._decode(sampler.chat_tokenizer().render(MESSAGES)).endswith(
        "What is 30 + 40?\nassistant\n"
    )
    done = asyncio.run(sampler.complete(MESSAGES, EIGHT))
    assert (done.text, done.reasoning, done.reasoning_closed, done.reasoning_tokens) == (
        sampler._decode(done.token_ids),
        None,
        True,
        0,
    )


def test_the_ggufs_own_template_thinks_not_so_thinking_on_changes_nothing(embedded: LlamaSampler) -> None:
    on = LlamaSampler(embedded_model_path(), embedded=True, n_threads=1, think=ThinkSplit(thinking="on"))
    on._llm, on._vocab = embedded._load(), embedded._vocab_model()
    plain, thinking = (asyncio.run(s.complete(MESSAGES, EIGHT)) for s in (embedded, on))
    assert thinking.text == plain.text and thinking.token_ids == plain.token_ids
    assert (thinking.reasoning, thinking.reasoning_closed, thinking.reasoning_tokens) == (None, True, 0)


def test_the_reasoning_tokens_are_counted_with_the_models_vocabulary(embedded: LlamaSampler) -> None:
    reasoning = "30 + 40 is 70, and seventy is the sum"
    ids = embedded._encode(f"<think>{reasoning}</think>The answer is 70.")
    text = embedded._decode(ids)
    done = embedded.reasoning_split(Completion(text, "stop", completion_tokens=len(ids)))
    assert (done.text, done.reasoning, done.reasoning_closed) == ("The answer is 70.", reasoning, True)
    assert done.reasoning_tokens == len(embedded._encode(reasoning)) == 16
    assert done.reasoning_tokens_estimated is False
