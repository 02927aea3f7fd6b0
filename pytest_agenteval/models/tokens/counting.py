"""Token counts on OpenAI-compatible endpoints, from the most faithful source there is:
`--tokenizer PATH` (local), the server's `/tokenize` with messages and tools (vLLM,
SGLang: its own template and tokenizer), llama.cpp's `/extras/tokenize` (text only), and
a 4-characters-per-token estimate only when none of these exists."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_agenteval.api.sampler import FatalRequestError, SamplerError, approx_token_count
from pytest_agenteval.models.http.client import InvalidRequest
from pytest_agenteval.models.tokens.template import ChatTokenizer

MODES = {
    "local": "--tokenizer {path}",
    "tokenize": "the server's /tokenize (its chat template and tokenizer)",
    "extras": "the server's /extras/tokenize (text; chat framing from server usage)",
    "content": "the server's /tokenize of text (llama-server; chat framing from server usage)",
    "estimate": "ESTIMATE: 4 characters a token (the server has no tokenize route; pass --tokenizer)",
}


def _ids_of(reply: Mapping[str, Any]) -> list[Any]:
    tokens = reply.get("tokens")
    return tokens if isinstance(tokens, list) else []


def _root(endpoint: str) -> str:
    """http://host:port/v1 -> http://host:port (vLLM serves /tokenize at the root)."""
    return endpoint[: -len("/v1")] if endpoint.endswith("/v1") else endpoint


class EndpointCounter:
    """Counts for one sampler; the probe runs once per process, on first use."""

    def __init__(self, sampler: Any, local: ChatTokenizer | None = None) -> None:
        self.sampler = sampler
        self.local = local
        self.mode = "local" if local is not None else ""
        self._lock = asyncio.Lock()

    @property
    def label(self) -> str:
        if self.mode == "local" and self.local is not None:
            return self.local.label
        return MODES.get(self.mode, "not probed")

    @property
    def exact(self) -> bool:
        return self.mode != "estimate"

    async def _post(self, url: str, body: Mapping[str, Any]) -> tuple[int, Any]:
        session = self.sampler._ensure_session()
        try:
            async with await session.post(url, body, self.sampler._headers(), timeout=30) as response:
                raw = await response.read()
                status = response.status
        except (asyncio.TimeoutError, OSError) as exc:  # HttpError is an OSError
            raise SamplerError(f"{url}: {type(exc).__name__} while counting tokens") from exc
        except InvalidRequest as exc:  # never sent (a control character in the API key)
            raise FatalRequestError(f"{url}: {exc}") from exc
        try:
            return status, json.loads(raw or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError):
            return status, None

    async def probe(self) -> str:
        if self.mode:
            return self.mode
        connect = getattr(self.sampler, "connect", None)
        if connect is not None:  # a sweep's later-wave server: once it is up. Waited for here,
            await connect()  # not under the lock: each rollout's wait is noted as not its latency
        async with self._lock:
            if self.mode:
                return self.mode
            root = _root(self.sampler.endpoints[0])
            hello = [{"role": "user", "content": "hi"}]
            # a route counts only if it gives tokens for "hi": llama.cpp's llama-server answers
            # a messages body on /tokenize with an empty list
            probes = (
                ("tokenize", "/tokenize", self._messages_body(hello, None)),
                ("extras", "/extras/tokenize", {"input": "hi"}),
                ("content", "/tokenize", {"content": "hi", "add_special": False}),
            )
            for mode, route, body in probes:
                status, reply = await self._post(f"{root}{route}", body)
                if status == 200 and isinstance(reply, dict) and _ids_of(reply):
                    self.mode = mode
                    return self.mode
            self.mode = "estimate"
            return self.mode

    def _messages_body(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        add_generation_prompt: bool = True,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.sampler.model_name,
            "messages": [dict(m) for m in messages],
            "add_generation_prompt": add_generation_prompt,
        }
        if tools:
            body["tools"] = [dict(t) for t in tools]
        if "chat_template_kwargs" in self.sampler.extra_body:
            body["chat_template_kwargs"] = self.sampler.extra_body["chat_template_kwargs"]
        return body

    async def _ids(self, route: str, body: Mapping[str, Any]) -> list[int]:
        root = _root(self.sampler.endpoints[0])
        status, reply = await self._post(f"{root}{route}", body)
        if status != 200 or not isinstance(reply, dict) or not isinstance(reply.get("tokens"), list):
            raise SamplerError(f"{root}{route}: tokenizing failed (HTTP {status})")
        return [int(token) for token in reply["tokens"]]

    async def encode_ids(self, text: str) -> list[int]:
        """Ids of plain text with the server's tokenizer (no special tokens added)."""
        mode = await self.probe()
        if mode == "extras":
            return await self._ids("/extras/tokenize", {"input": text})
        if mode == "content":
            return await self._ids("/tokenize", {"content": text, "add_special": False})
        body = {"model": self.sampler.model_name, "prompt": text, "add_special_tokens": False}
        return await self._ids("/tokenize", body)

    async def render_ids(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        add_generation_prompt: bool = True,
    ) -> list[int]:
        """Ids of messages rendered by the server's own chat template (`/tokenize`)."""
        if await self.probe() != "tokenize":
            raise SamplerError(
                f"{self.sampler.endpoints[0]} has no /tokenize with messages (vLLM, SGLang): "
                "token-in/token-out needs it; use --continuation messages"
            )
        return await self._ids("/tokenize", self._messages_body(messages, tools, add_generation_prompt))

    async def count_text(self, text: str) -> int:
        mode = await self.probe()
        if mode == "local" and self.local is not None:
            return self.local.count(text)
        if mode == "estimate":
            return approx_token_count(text)
        return len(await self.encode_ids(text))

    async def count_prompt(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
    ) -> int | None:
        """Tokens of the rendered prompt (generation prompt included) where the counter can
        render it; None where it cannot (then server usage and text counts stand in)."""
        mode = await self.probe()
        if mode == "local" and self.local is not None:
            return len(self.local.render(messages, tools, True))
        if mode != "tokenize":
            return None
        return len(await self.render_ids(messages, tools))


class ServerChatTokenizer:
    """The server's template and tokenizer behind the continuation interface (`arender`,
    `aencode`), for token-in/token-out over HTTP (vLLM `/tokenize` + `/v1/completions`)."""

    def __init__(self, counter: EndpointCounter) -> None:
        self.counter = counter
        self.label = MODES["tokenize"]

    async def arender(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        add_generation_prompt: bool,
    ) -> list[int]:
        return await self.counter.render_ids(messages, tools, add_generation_prompt)

    async def aencode(self, text: str) -> list[int]:
        return await self.counter.encode_ids(text)
