"""Tokenize routes of real servers, for testing token counting: vLLM's `/tokenize`
(a prompt, or messages rendered by a chat template) and llama-cpp-python's
`/extras/tokenize` (text). The fixture's tokenizer is one token per character, so a
count that came from the server is told apart from a 4-characters-a-token estimate."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from pytest_agenteval.testing._responders import content_text


def render_chatml(body: Mapping[str, Any]) -> str:
    """ChatML text of a vLLM `/tokenize` messages request (tools as a JSON block)."""
    parts = []
    if body.get("tools"):
        parts.append(f"<|im_start|>system\n<tools>{json.dumps(body['tools'])}</tools><|im_end|>\n")
    for message in body.get("messages") or []:
        content = content_text(message.get("content"))
        if message.get("role") == "tool":  # as the Qwen templates render a tool result
            parts.append(f"<|im_start|>user\n<tool_response>\n{content}\n</tool_response><|im_end|>\n")
        else:
            parts.append(f"<|im_start|>{message.get('role')}\n{content}<|im_end|>\n")
    if body.get("add_generation_prompt", True):
        parts.append("<|im_start|>assistant\n")
    return "".join(parts)


def char_tokens(text: str) -> list[int]:
    return [ord(char) for char in text]


def add_tokenize_routes(
    app: web.Application,
    flavour: str,
    counter: dict[str, int],
    tokenizer: Callable[[str], list[int]] = char_tokens,
    max_model_len: int = 1 << 20,
) -> None:
    """`tokenizer`: one token a character, or the billing server's (_billing.py)."""

    async def vllm(request: web.Request) -> web.Response:
        counter["tokenize"] = counter.get("tokenize", 0) + 1
        body = await request.json()
        text = render_chatml(body) if "messages" in body else str(body.get("prompt", ""))
        tokens = tokenizer(text)
        return web.json_response({"count": len(tokens), "max_model_len": max_model_len, "tokens": tokens})

    async def llama(request: web.Request) -> web.Response:
        counter["tokenize"] = counter.get("tokenize", 0) + 1
        body = await request.json()
        return web.json_response({"tokens": tokenizer(str(body.get("input", "")))})

    async def llama_server(request: web.Request) -> web.Response:
        # llama.cpp's C++ server: text under "content"; any other body gives no tokens
        counter["tokenize"] = counter.get("tokenize", 0) + 1
        body = await request.json()
        return web.json_response({"tokens": tokenizer(str(body.get("content", "")))})

    if flavour == "vllm":
        app.router.add_post("/tokenize", vllm)
    elif flavour == "llama":
        app.router.add_post("/extras/tokenize", llama)
    elif flavour == "llama-server":
        app.router.add_post("/tokenize", llama_server)
    elif flavour != "none":
        raise ValueError(f"tokenize must be 'none', 'vllm', 'llama' or 'llama-server', got {flavour!r}")


def decode_chars(ids: list[int]) -> str:
    return "".join(chr(i) for i in ids)


def token_id_prompt(body: dict[str, Any]) -> list[int] | None:
    """The ids of a `/v1/completions` request whose prompt is token ids (vLLM's form)."""
    prompt = body.get("prompt")
    if (
        isinstance(prompt, list)
        and prompt
        and all(isinstance(i, int) and not isinstance(i, bool) for i in prompt)
    ):
        return prompt
    return None
