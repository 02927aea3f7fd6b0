"""The one place a backend's reply is split into reasoning and answer (api/reasoning.py),
for every backend: endpoints and launched servers (after the server's own split, if
any), llama.cpp and transformers in-process, and the SDK samplers. Each calls
`ThinkSplit.apply` on the Completion it built from the raw reply, so `Completion.text`
is the answer only wherever it came from."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_agenteval.api.reasoning import DEFAULT_THINK_TAGS, parse_think_tags, split_reasoning
from pytest_agenteval.api.sampler import Completion
from pytest_agenteval.models.tokens.template import TemplateError, render_chat_template

# Think tags chat templates use, by their closing tag: a template holding one of these
# gives the run its tags when --think-tags is not set.
TEMPLATE_THINK_TAGS: tuple[tuple[str, str], ...] = (
    ("<think>", "</think>"),  # Qwen3, QwQ, DeepSeek-R1, SmolLM3, GLM
    ("<seed:think>", "</seed:think>"),  # Seed-OSS
    ("<|START_THINKING|>", "<|END_THINKING|>"),  # Command A reasoning
    ("[THINK]", "[/THINK]"),  # Magistral
)


def template_think_tags(template: str | None) -> tuple[str, str] | None:
    """The think tags a chat template writes, None when it writes none. The more specific
    pairs first: `</seed:think>` also holds no `</think>`, but check it before the plain one."""
    if not template:
        return None
    for opening, closing in sorted(TEMPLATE_THINK_TAGS, key=lambda pair: -len(pair[1])):
        if closing in template:
            return opening, closing
    return None


@dataclass(frozen=True)
class ThinkSplit:
    """How this run splits replies. `tags`: --think-tags (None: not given, so the chat
    template's tags where the backend has its template, else `<think>,</think>`);
    `thinking`: --thinking ("on" | "off" | "omit")."""

    tags: tuple[str, str] | None = None
    thinking: str = "off"
    # Whether the prompt ends inside an opened think block (the template rendered here, with
    # --thinking): True: the reply starts inside the thoughts, closed by the closing tag or
    # never; False: it cannot (a reply cut off without tags is an answer cut short); None: not
    # known (an endpoint renders its own prompt): --thinking on with a cut-off reply and no
    # tag at all counts as unclosed reasoning
    prompt_opens: bool | None = None

    @classmethod
    def from_settings(cls, settings: Any) -> ThinkSplit:
        text = getattr(settings, "think_tags", "") or ""
        return cls(parse_think_tags(text) if text else None, getattr(settings, "thinking", "off"))

    @property
    def enable_thinking(self) -> bool | None:
        """What a chat template rendered here gets as `enable_thinking` (None: not passed)."""
        return None if self.thinking == "omit" else self.thinking == "on"

    def with_template(self, template: str | None) -> ThinkSplit:
        """The tags of this template where --think-tags did not name any."""
        tags = self.tags if self.tags is not None else template_think_tags(template)
        opens = (
            False if tags is None or not template else _opens_block(template, tags[0], self.enable_thinking)
        )
        return dataclasses.replace(self, tags=tags, prompt_opens=opens)

    def cache_key(self) -> dict[str, Any]:
        """What of this split a cached completion depends on, {} for the defaults (keys of
        runs that never set them stay as they were)."""
        key: dict[str, Any] = {}
        if self.tags is not None and self.tags != DEFAULT_THINK_TAGS:
            key["think_tags"] = list(self.tags)
        if self.thinking != "off":
            key["thinking"] = self.thinking
        return key

    def apply(self, completion: Completion, count_tokens: Callable[[str], int] | None = None) -> Completion:
        """The completion with `text` the answer only and the reasoning fields filled.
        `completion.reasoning` on the way in is what the server separated (reasoning_content);
        `completion.reasoning_tokens`, what the server reported (kept). Otherwise the
        reasoning's tokens are counted with `count_tokens` (the backend's own tokenizer:
        exact), or, without one, all of completion_tokens for a reasoning that never closed
        (exact: nothing else was generated) and else an estimate from the reasoning's share
        of the characters (`reasoning_tokens_estimated`)."""
        tags = self.tags or DEFAULT_THINK_TAGS
        text = completion.text
        if self.prompt_opens and tags[0] not in text:
            text = tags[0] + text  # the block the prompt opened
        split = split_reasoning(
            text,
            reasoning_content=completion.reasoning,
            tags=tags,
            thinking=self.thinking == "on" and self.prompt_opens is None,
            truncated=completion.finish_reason == "length",
        )
        tokens, estimated = completion.reasoning_tokens, False
        if tokens is None:
            tokens, estimated = _reasoning_tokens(
                split.reasoning, split.answer, split.closed, completion, count_tokens
            )
        return dataclasses.replace(
            completion,
            text=split.answer,
            reasoning=split.reasoning,
            reasoning_closed=split.closed,
            reasoning_tokens=tokens,
            reasoning_tokens_estimated=estimated,
        )


def _opens_block(template: str, opening: str, enable_thinking: bool | None) -> bool | None:
    """Whether the template's generation prompt ends with the opening tag (DeepSeek-R1-0528,
    Qwen3-2507 thinking, QwQ open the block there); None when it cannot render a plain turn."""
    try:
        text = render_chat_template(
            template, [{"role": "user", "content": "1 + 1?"}], enable_thinking=enable_thinking
        )
    except TemplateError:
        return None
    return text.rstrip().endswith(opening)


def _reasoning_tokens(
    reasoning: str | None,
    answer: str,
    closed: bool,
    completion: Completion,
    count_tokens: Callable[[str], int] | None,
) -> tuple[int | None, bool]:
    if reasoning is None:
        return 0, False
    total = completion.completion_tokens
    if not closed and total is not None:
        return total, False
    if count_tokens is not None:
        counted = count_tokens(reasoning)
        return (min(counted, total) if total is not None else counted), False
    if total is None:
        return None, False  # one of n samples: its own tokens are not known
    share = len(reasoning) / max(1, len(reasoning) + len(answer))
    return round(total * share), True
