"""How a ReTool trajectory continues from one turn to the next, and how it is counted.

- tokens: the backend samples from token ids (in-process GGUF). The prompt is rendered once
  by the model's chat template with the tool schema; every later prompt is the sampled ids
  verbatim plus the template's closing and tool-message ids (the lab's token-in/token-out).
- messages: chat endpoints. The server renders the message list each turn; the budget
  counts with the server's tokenizer (`/tokenize`, `/extras/tokenize`), `--tokenizer`,
  or, as a flagged last resort, an estimate.
Both count the trajectory as the lab does: the whole next prompt, the initial one included."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pytest_agenteval.api.sampler import approx_token_count
from pytest_agenteval.models import Completion, SamplingParams
from pytest_agenteval.models.tokens.template import assistant_boundary, next_prompt_tokens
from pytest_agenteval.tasks.aime25._protocol import CODE_TOOL

TOOLS = [CODE_TOOL]


class TokenConversation:
    """Token-in/token-out: the sampled ids are kept verbatim (in-process GGUF, or vLLM
    `/v1/completions` with `--continuation tokens`, rendered by the server's `/tokenize`)."""

    mode = "tokens"

    def __init__(self, sampler: Any, messages: list[dict[str, Any]]) -> None:
        self.sampler = sampler
        self.tokenizer = sampler.chat_tokenizer()
        self.counting = self.tokenizer.label
        self.messages = messages
        self.prompt: list[int] = []
        self._before: list[dict[str, Any]] = []
        self._completion: tuple[int, ...] = ()
        self._boundary: tuple[list[int], list[int]] | None = None  # of the last assistant turn
        self._fitted: tuple[str, list[int]] = ("", [])  # the last observation measured, its prompt

    async def prompt_length(self) -> int:
        if not self.prompt:
            self.prompt = await self.tokenizer.arender(self.messages, TOOLS, True)
        return len(self.prompt)

    async def sample(self, params: SamplingParams) -> Completion:
        completion = await self.sampler.complete_tokens(self.prompt, params)
        self._completion = completion.token_ids
        return completion

    def add_assistant(self, text: str, completion: Completion) -> None:
        self._before = list(self.messages)
        self._boundary = None
        self.messages.append({"role": "assistant", "content": text})

    def tool_call_id(self, default: str) -> str:
        return default

    async def next_prompt(self, tool_message: Mapping[str, Any]) -> list[int]:
        if self._boundary is None:  # the same for every cut of this turn's tool output
            self._boundary = await assistant_boundary(self.tokenizer, TOOLS, self._before)
        return await next_prompt_tokens(
            self.tokenizer, TOOLS, self._before, self.prompt, self._completion, tool_message, self._boundary
        )

    async def length_with(self, tool_message: Mapping[str, Any]) -> int:
        prompt = await self.next_prompt(tool_message)
        self._fitted = (str(tool_message["content"]), prompt)
        return len(prompt)

    async def count(self, text: str) -> int:
        return len(await self.tokenizer.aencode(text))

    def add_tool(self, tool_message: Mapping[str, Any]) -> None:
        content, prompt = self._fitted
        assert content == tool_message["content"], "add_tool follows length_with of the same message"
        self.prompt = prompt
        self.messages.append(dict(tool_message))


class MessageConversation:
    """Chat endpoints: the server renders the message list on every turn. Where the counter
    renders prompts too (`/tokenize` with messages, `--tokenizer`), every length is its
    exact count; elsewhere the server's usage after each turn plus counted observations."""

    mode = "messages"

    def __init__(self, sampler: Any, messages: list[dict[str, Any]]) -> None:
        self.sampler = sampler
        self.counter = getattr(sampler, "counter", None)
        self.messages = messages
        self._length: int | None = None  # the next prompt's tokens, as last counted
        self._fitted: tuple[str, int] = ("", 0)  # the last observation measured, and its length
        self.counting = "ESTIMATE: 4 characters a token"

    async def _rendered_length(self, messages: list[dict[str, Any]]) -> int | None:
        if self.counter is None:
            return None
        return await self.counter.count_prompt(messages, TOOLS)

    async def prompt_length(self) -> int:
        if self._length is None:
            exact = await self._rendered_length(self.messages)
            self._length = exact if exact is not None else await self._estimate(self.messages)
        if self.counter is not None:
            self.counting = self.counter.label
        return self._length

    async def _estimate(self, messages: list[dict[str, Any]]) -> int:
        """Content tokens plus 4 a message for the framing, plus the tool schema."""
        total = await self.count(json.dumps(TOOLS))
        for message in messages:
            total += 4 + await self.count(str(message.get("content") or ""))
        return total

    async def sample(self, params: SamplingParams) -> Completion:
        completion = await self.sampler.complete(self.messages, params, tools=TOOLS, tool_choice="none")
        if completion.prompt_tokens:  # the server's own count of what it rendered
            self._length = completion.prompt_tokens + completion.completion_tokens
        elif self._length is not None:
            self._length += completion.completion_tokens
        return completion

    def add_assistant(self, text: str, completion: Completion) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if completion.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id or f"call_{index}",
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for index, call in enumerate(completion.tool_calls)
            ]
        self.messages.append(message)

    def tool_call_id(self, default: str) -> str:
        calls = self.messages[-1].get("tool_calls") or []
        return calls[0]["id"] if calls else default

    async def length_with(self, tool_message: Mapping[str, Any]) -> int:
        exact = await self._rendered_length([*self.messages, dict(tool_message)])
        if exact is None:
            assert self._length is not None
            exact = self._length + 4 + await self.count(str(tool_message["content"]))
        self._fitted = (str(tool_message["content"]), exact)
        return exact

    async def count(self, text: str) -> int:
        if self.counter is None:
            return approx_token_count(text)
        return await self.counter.count_text(text)

    def add_tool(self, tool_message: Mapping[str, Any]) -> None:
        self.messages.append(dict(tool_message))
        content, length = self._fitted
        self._length = length if content == tool_message["content"] else None


def open_conversation(sampler: Any, messages: list[dict[str, Any]]) -> Any:
    if getattr(sampler, "token_io", False):
        return TokenConversation(sampler, messages)
    return MessageConversation(sampler, messages)
