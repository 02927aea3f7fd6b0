"""Billing as a provider does it (`ServerConfig(billing=True)`): the reply's usage comes
from the server's own tokenizer, not from 4 characters a token, and every token it
generates is counted (`server.billed`), whether or not the client ever read the reply: a
reply cut short, a reset after the request arrived, a stall the client gave up on, a
client that hung up during the latency (its timeout: billed as the handler is cancelled),
a gateway's 502 or 504. A 429, 500 or 503 status, a refused or invalid request, bills
nothing.

The tokenizer is a stand-in for a byte-level BPE: a ChatML special token is 1, a run of
ASCII letters is one token per 3 letters, any other ASCII character (digit, space,
punctuation) is 1, and any other character is one token per byte of its UTF-8 (CJK: 3,
an emoji: 4). It never makes more tokens than UTF-8 bytes (as a byte-level BPE never
does), and it makes far more than 4 characters a token: ~1.4x for English, 12x for
Chinese. `/tokenize` (with `tokenize="vllm"`) counts with it too."""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from typing import Any

from pytest_agenteval.testing._responders import content_text

SPECIAL = ("<|im_start|>", "<|im_end|>")
UNBILLED_FAULTS = frozenset({"429", "500", "503"})  # turned away before the model generates
_PIECES = re.compile(r"<\|im_start\|>|<\|im_end\|>|[A-Za-z]{1,3}|[\x00-\x7f]|[^\x00-\x7f]")


def bill_ids(text: str) -> list[int]:
    """The billing tokenizer's ids of `text` (the module's docstring)."""
    ids: list[int] = []
    for piece in _PIECES.findall(text):
        if piece in SPECIAL:
            ids.append(1_000_000 + SPECIAL.index(piece))
        elif piece.isascii():
            ids.append(sum(ord(c) << (8 * i) for i, c in enumerate(piece)))
        else:
            ids.extend(piece.encode("utf-8"))
    return ids


def bill_tokens(text: str) -> int:
    return len(bill_ids(text))


def billed_prompt(body: Mapping[str, Any]) -> int:
    """A request's prompt tokens: its messages rendered as ChatML (what /tokenize gives),
    or its text prompt, or its token ids."""
    from pytest_agenteval.testing._tokenize import render_chatml

    if "prompt_ids" in body:
        return len(body["prompt_ids"])
    if "messages" in body:
        return bill_tokens(render_chatml(body))
    prompt = body.get("prompt")
    return bill_tokens(prompt[0] if isinstance(prompt, list) else str(prompt or ""))


def _choice_text(choice: Mapping[str, Any]) -> str:
    message = choice.get("message") or {}
    text = content_text(message.get("content")) if message else str(choice.get("text") or "")
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        text += str(function.get("name") or "") + str(function.get("arguments") or "")
    return text + str(message.get("reasoning_content") or "")


class Billing:
    """The server's own books: what it billed, over every generation."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.prompt_tokens = self.completion_tokens = self.generations = 0

    def bill(self, body: Mapping[str, Any], payload: dict[str, Any]) -> None:
        """Set `payload`'s usage to the billing tokenizer's counts (each choice's at most
        `max_tokens`: a server stops generating there) and add them to the books."""
        limit = body.get("max_tokens") or body.get("max_completion_tokens")
        completion = 0
        for choice in payload.get("choices") or ():
            tokens = bill_tokens(_choice_text(choice))
            completion += min(tokens, int(limit)) if limit else tokens
        prompt = billed_prompt(body)
        usage = payload.setdefault("usage", {})
        usage.update(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)
        with self._lock:
            self.prompt_tokens += prompt
            self.completion_tokens += completion
            self.generations += 1

    def totals(self) -> dict[str, int]:
        with self._lock:
            return {
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "generations": self.generations,
            }
