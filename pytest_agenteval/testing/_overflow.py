"""A prompt over the context window, refused as each real server refuses it.

`ServerConfig(context_tokens=N, context_style=...)`: a request whose prompt (the server's
4-characters-a-token estimate) does not fit in N tokens gets the 400 that server sends, so
a client's reading of each server's words is tested over real sockets:

- `llama-server`: llama.cpp's C++ server (`exceed_context_size_error`, the prompt alone);
- `vllm`: vLLM's `BadRequestError` (the prompt alone, or with `max_tokens` over it);
- `sglang`: SGLang's (`"object": "error"` at the top level, the prompt alone);
- `openai`: OpenAI's and llama-cpp-python's server (`context_length_exceeded`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CONTEXT_STYLES = ("llama-server", "vllm", "sglang", "openai")


def overflow_body(style: str, prompt: int, context: int, max_tokens: int) -> dict[str, Any] | None:
    """The server's 400 body for a prompt of `prompt` tokens asking `max_tokens` more, or
    None when it fits (llama.cpp, SGLang and OpenAI refuse on the prompt alone here)."""
    if style == "llama-server" and prompt >= context:
        return {
            "error": {
                "code": 400,
                "message": f"request ({prompt} tokens) exceeds the available context size "
                f"({context} tokens), try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": prompt,
                "n_ctx": context,
            }
        }
    if style == "vllm" and prompt >= context:
        message = (
            f"This model's maximum context length is {context} tokens. However, your request has "
            f"{prompt} input tokens. Please reduce the length of the input messages."
        )
        return {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}
    if style == "vllm" and prompt + max_tokens > context:
        message = (
            f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's maximum "
            f"context length is {context} tokens and your request has {prompt} input tokens "
            f"({max_tokens} > {context} - {prompt})."
        )
        return {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}
    if style == "sglang" and prompt >= context:
        message = f"The input ({prompt} tokens) is longer than the model's context length ({context} tokens)."
        return {"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": 400}
    if style == "openai" and prompt > context:
        message = (
            f"This model's maximum context length is {context} tokens. However, your messages resulted "
            f"in {prompt} tokens. Please reduce the length of the messages."
        )
        return {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        }
    return None


def request_overflow(
    style: str, context: int | None, body: Mapping[str, Any], prompt: int
) -> dict[str, Any] | None:
    """The refusal of this request body (its prompt estimated at `prompt` tokens), if any."""
    if context is None:
        return None
    max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
    return overflow_body(style, prompt, context, max_tokens)
