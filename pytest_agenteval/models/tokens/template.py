"""The model's own chat template and tokenizer, client-side: render messages (with tools,
thinking as --thinking says) to token ids as transformers' `apply_chat_template(tokenize=True)`
does, and continue a conversation token-in/token-out as the ReTool lab's protocol.py does."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

Encode = Callable[[str], list[int]]  # text -> ids, special tokens parsed, no BOS added
Decode = Callable[[Sequence[int]], str]  # ids -> text, special tokens skipped


class TemplateError(ValueError):
    """The chat template cannot render or cannot be continued token by token."""


def _tojson(value: Any, indent: int | None = None, ensure_ascii: bool = False, **kwargs: Any) -> str:
    # transformers' own `tojson` (not jinja's): no HTML escaping, unicode kept
    return json.dumps(
        value, indent=indent, ensure_ascii=ensure_ascii, sort_keys=kwargs.get("sort_keys", False)
    )


def _raise(message: str) -> None:
    raise TemplateError(f"chat template: {message}")


@lru_cache(maxsize=8)
def _compiled(template: str) -> Any:
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(template)


def render_chat_template(
    template: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    bos_token: str = "",
    eos_token: str = "",
    enable_thinking: bool | None = False,
) -> str:
    """The template's text for `messages`, with the variables transformers passes
    (`enable_thinking` None: not passed, the template's own default; --thinking omit)."""
    thinking = {} if enable_thinking is None else {"enable_thinking": enable_thinking}
    try:
        return _compiled(template).render(
            messages=[dict(m) for m in messages],
            tools=[dict(t) for t in tools] if tools else None,
            add_generation_prompt=add_generation_prompt,
            bos_token=bos_token,
            eos_token=eos_token,
            **thinking,
        )
    except TemplateError:
        raise
    except Exception as exc:  # jinja errors: name the template, not our code
        raise TemplateError(f"chat template failed to render: {exc}") from None


class ChatTokenizer:
    """A chat template with the tokenizer that goes with it."""

    def __init__(
        self,
        template: str,
        encode: Encode,
        decode: Decode,
        *,
        bos_token: str = "",
        eos_token: str = "",
        label: str = "",
    ) -> None:
        self.template = template
        self.encode = encode
        self.decode = decode
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.label = label
        self.enable_thinking: bool | None = False  # --thinking, set by the sampler rendering with it

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
        add_generation_prompt: bool = True,
    ) -> list[int]:
        text = render_chat_template(
            self.template,
            messages,
            tools=tools,
            add_generation_prompt=add_generation_prompt,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
            enable_thinking=self.enable_thinking,
        )
        return self.encode(text)

    def count(self, text: str) -> int:
        return len(self.encode(text))

    # the interface token-in/token-out continuation uses, shared with server tokenizers
    async def arender(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        add_generation_prompt: bool,
    ) -> list[int]:
        return self.render(messages, tools, add_generation_prompt)

    async def aencode(self, text: str) -> list[int]:
        return self.encode(text)


def _suffix_prefix_overlap(tokens: Sequence[int], suffix: Sequence[int]) -> int:
    for length in range(min(len(tokens), len(suffix)), 0, -1):
        if list(tokens[-length:]) == list(suffix[:length]):
            return length
    return 0


_PLACEHOLDER = {"role": "assistant", "content": "x"}


async def assistant_boundary(
    tokenizer: Any,
    tools: Sequence[Mapping[str, Any]] | None,
    messages_before_assistant: Sequence[Mapping[str, Any]],
) -> tuple[list[int], list[int]]:
    """(the conversation with a placeholder assistant turn, the ids that close that turn),
    rendered once per assistant turn: they do not depend on the tool output."""
    canonical_prompt = await tokenizer.arender(messages_before_assistant, tools, True)
    assistant_end = await tokenizer.arender([*messages_before_assistant, _PLACEHOLDER], tools, False)
    action = [*canonical_prompt, *await tokenizer.aencode("x")]
    if assistant_end[: len(action)] != action:
        raise TemplateError(
            "the chat template does not end the assistant turn where the sampled tokens end; "
            "token-in/token-out continuation is impossible with it"
        )
    return assistant_end, assistant_end[len(action) :]


async def next_prompt_tokens(
    tokenizer: Any,
    tools: Sequence[Mapping[str, Any]] | None,
    messages_before_assistant: Sequence[Mapping[str, Any]],
    previous_prompt: Sequence[int],
    completion: Sequence[int],
    tool_message: Mapping[str, Any],
    boundary: tuple[list[int], list[int]] | None = None,
) -> list[int]:
    """The lab's `build_next_prompt`: the sampled ids verbatim, then the template's
    assistant-closing ids (those the sampler did not already return), then the ids the
    template adds for the tool message. The deltas come from a placeholder assistant
    message, so a template that rewrites assistant text cannot move the boundary.
    `tokenizer` has async `arender` and `aencode` (a local ChatTokenizer or a server's);
    `boundary` is `assistant_boundary`'s answer, when the caller kept it."""
    if boundary is None:
        boundary = await assistant_boundary(tokenizer, tools, messages_before_assistant)
    assistant_end, closing = boundary
    with_assistant = [*messages_before_assistant, _PLACEHOLDER]
    next_canonical = await tokenizer.arender([*with_assistant, dict(tool_message)], tools, True)
    if next_canonical[: len(assistant_end)] != assistant_end:
        raise TemplateError("the chat template rewrites earlier messages when a tool message is added")
    observation = next_canonical[len(assistant_end) :]
    overlap = _suffix_prefix_overlap(completion, closing)
    return [*previous_prompt, *completion, *closing[overlap:], *observation]


def tokenizer_from_file(path: str | Path, chat_template: str | Path | None = None) -> ChatTokenizer:
    """`--tokenizer PATH`: a `tokenizer.json` (or the folder holding it) through the
    `tokenizers` package, with the chat template from `chat_template` (a Jinja file), else
    `tokenizer_config.json` or `chat_template.jinja` beside it. Raises ValueError with one
    line naming the fix. Loaded once per process: start-up validation and the sampler share it."""
    return _tokenizer_from_file(str(path), str(chat_template) if chat_template else None)


@lru_cache(maxsize=4)
def _tokenizer_from_file(path: str, chat_template: str | None = None) -> ChatTokenizer:
    target = Path(path).expanduser()
    folder = target if target.is_dir() else target.parent
    file = target / "tokenizer.json" if target.is_dir() else target
    if not file.is_file():
        raise ValueError(f"--tokenizer {path}: no tokenizer.json there; give the file or its folder")
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ValueError(
            "--tokenizer needs the `tokenizers` package: pip install 'pytest-agenteval[tokenizer]'"
        ) from None
    try:
        tokenizer = Tokenizer.from_file(str(file))
    except Exception as exc:  # the tokenizers package raises a bare Exception
        raise ValueError(f"--tokenizer {path}: {file} is not a tokenizer.json ({exc})") from None
    config: dict[str, Any] = {}
    if (folder / "tokenizer_config.json").is_file():
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: the default one
        template = next((t["template"] for t in template if t.get("name") == "default"), None)
    if (folder / "chat_template.jinja").is_file():
        template = (folder / "chat_template.jinja").read_text(encoding="utf-8")
    if chat_template:
        try:
            template = Path(chat_template).expanduser().read_text(encoding="utf-8")
        except OSError as exc:
            reason = exc.strerror or exc
            raise ValueError(f"--chat-template {chat_template}: {reason}; give a Jinja file") from None
    if not template:
        raise ValueError(
            f"--tokenizer {path}: no chat template (tokenizer_config.json `chat_template` or "
            "chat_template.jinja); add one beside tokenizer.json"
        )
    return ChatTokenizer(
        template,
        lambda text: tokenizer.encode(text, add_special_tokens=False).ids,
        lambda ids: tokenizer.decode(list(ids), skip_special_tokens=True),
        bos_token=_token_text(config.get("bos_token")),
        eos_token=_token_text(config.get("eos_token")),
        label=f"tokenizer file {file}",
    )


def _token_text(value: Any) -> str:
    if isinstance(value, Mapping):  # {"content": "<|im_end|>", ...}
        return str(value.get("content") or "")
    return str(value or "")
