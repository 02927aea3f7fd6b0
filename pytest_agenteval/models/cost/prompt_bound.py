"""A request's prompt tokens before it is sent, as an upper bound: what the budget
reserves for the prompt (docs/cost.md#budgets). The settled cost is always the usage the
provider reports; this bound only decides whether a request may go out.

From the most faithful source there is:
- the backend's own tokenizer: the server's `/tokenize` with messages (vLLM, SGLang: its
  chat template and tokenizer; exact), `--tokenizer PATH` in-process (exact), the
  server's text `/tokenize` (llama.cpp: the text exact, the framing bounded);
- tiktoken, for OpenAI's models, where it is installed (the text exact, the framing bounded);
- else one token per UTF-8 byte of the request's text, plus the framing. A byte-level
  BPE tokenizer (GPT, Llama 3, Qwen) never makes more tokens than bytes, whatever the
  script, and neither does SentencePiece with byte fallback: each token but the special
  ones covers at least one byte. The special tokens and the template's own text are the
  framing: MESSAGE_FRAMING a message, REQUEST_FRAMING a request (BOS, the generation
  prompt, a default system prompt such as Qwen2.5's), TOOLS_FRAMING where tools are
  declared (the template's instructions around them)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MESSAGE_FRAMING = 8  # ChatML: <|im_start|> role \n ... <|im_end|> \n is 5; Llama 3's is 5
REQUEST_FRAMING = 32  # BOS, the generation prompt, a default system prompt (Qwen2.5's: ~20)
TOOLS_FRAMING = 256  # a template's instructions around the tools (Hermes / Qwen: ~150)

BYTES = "UTF-8 bytes + framing"
TOKEN_IDS = "token ids"
SERVER = "the server's /tokenize"
SERVER_TEXT = "the server's text /tokenize + framing"
LOCAL = "--tokenizer"
TIKTOKEN = "tiktoken + framing"


@dataclass(frozen=True)
class PromptBound:
    tokens: int
    method: str  # how it was counted (one of the names above): the summary records it


def _text_parts(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> list[str]:
    """Every piece of text the server renders into the prompt."""
    parts = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif content:  # content parts (text, images): their JSON bounds their text
            parts.append(json.dumps(content, ensure_ascii=False, default=str))
        for name in ("tool_calls", "name", "tool_call_id", "reasoning_content"):
            value = message.get(name)
            if value:
                parts.append(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
    if tools:
        parts.append(json.dumps(list(tools), ensure_ascii=False, default=str))
    return parts


def framing(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None) -> int:
    return REQUEST_FRAMING + MESSAGE_FRAMING * len(messages) + (TOOLS_FRAMING if tools else 0)


def byte_bound(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None
) -> int:
    """One token per UTF-8 byte of the text, plus the framing (the module's docstring)."""
    text = sum(len(part.encode("utf-8")) for part in _text_parts(messages, tools))
    return text + framing(messages, tools)


def tiktoken_bound(
    model: str, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> int | None:
    """The text's tokens by tiktoken's encoding for `model`, plus the framing; None where
    tiktoken is not installed or does not know the model (it is never installed for this)."""
    try:
        import tiktoken
    except ImportError:
        return None
    try:
        encoding = tiktoken.encoding_for_model(model)
    except (KeyError, ValueError):
        return None
    text = sum(len(encoding.encode(part, disallowed_special=())) for part in _text_parts(messages, tools))
    return text + framing(messages, tools)


def body_parts(body: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]] | None]:
    """The messages and tools of a chat body; a /v1/completions text prompt as one message."""
    if "messages" in body:
        return list(body["messages"]), body.get("tools")
    prompt = body.get("prompt")
    text = prompt[0] if isinstance(prompt, list) and prompt and isinstance(prompt[0], str) else prompt
    return [{"role": "user", "content": str(text or "")}], None


async def prompt_bound(counter: Any, model: str, body: Mapping[str, Any]) -> PromptBound:
    """The bound for one request `body` of an HTTP sampler whose token counter is
    `counter` (models/tokens/counting.EndpointCounter; None: none)."""
    prompt = body.get("prompt")
    if isinstance(prompt, list) and prompt and all(isinstance(i, int) for i in prompt):
        return PromptBound(len(prompt) + 1, TOKEN_IDS)  # the ids themselves (+1: a BOS added)
    messages, tools = body_parts(body)
    if counter is not None:
        try:
            mode = await counter.probe()
            if mode in ("local", "tokenize") and "messages" in body:
                counted = await counter.count_prompt(messages, tools)
                if counted is not None:
                    return PromptBound(counted, LOCAL if mode == "local" else SERVER)
            if mode in ("extras", "content", "local"):
                text = await counter.count_text("\n".join(_text_parts(messages, tools)))
                return PromptBound(text + framing(messages, tools), SERVER_TEXT if mode != "local" else LOCAL)
        except Exception:  # noqa: BLE001 - a tokenize route that fails: the byte bound stands in
            pass
    counted = tiktoken_bound(model, messages, tools)
    if counted is not None:
        return PromptBound(counted, TIKTOKEN)
    return PromptBound(byte_bound(messages, tools), BYTES)
