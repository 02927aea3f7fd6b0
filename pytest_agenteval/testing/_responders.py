"""What the mock model says: replies, responders and the scripted tool-calling model.

A *responder* is any callable ``(request_json) -> ReplyLike`` where ``ReplyLike`` is a
``Reply``, a ``str`` or a sequence of those (choice ``i`` of an ``n > 1`` request gets
item ``i % len``). Responders must be deterministic functions of the request so that
tests can predict every byte the server sends.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DEFAULT_ANSWER = "Let me think. 7 * 10 = 70. The answer is \\boxed{70}."

# Only these placeholders are substituted: plain ``str.format`` would choke on the
# braces of LaTeX answers such as ``\boxed{70}``.
PLACEHOLDERS = ("{seed}", "{n}", "{index}", "{model}")


@dataclass(frozen=True)
class ToolCall:
    """One tool call; ``arguments`` is a dict (serialised to a JSON string on the wire)."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments), ensure_ascii=False)


@dataclass(frozen=True)
class Reply:
    """One assistant turn: text and/or native tool calls.

    ``template=True`` marks text whose ``{seed}``/``{n}``/``{index}``/``{model}``
    placeholders the server fills in (used by the built-in responders; scripted replies
    default to literal text because code often contains braces).
    """

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    template: bool = False

    def __post_init__(self) -> None:
        calls = tuple(_as_tool_call(c) for c in self.tool_calls)
        object.__setattr__(self, "tool_calls", calls)


ReplyLike = Reply | str | Sequence[Reply | str]
Responder = Callable[[dict[str, Any]], ReplyLike]


def _as_tool_call(call: ToolCall | Mapping[str, Any]) -> ToolCall:
    if isinstance(call, ToolCall):
        return call
    return ToolCall(name=str(call["name"]), arguments=call.get("arguments", {}))


def normalize_replies(value: ReplyLike) -> list[Reply]:
    """Turn a responder's return value into a non-empty list of ``Reply``."""
    items = [value] if isinstance(value, (Reply, str)) else list(value)
    replies = [Reply(text=v) if isinstance(v, str) else v for v in items]
    if not replies or not all(isinstance(r, Reply) for r in replies):
        raise TypeError(f"responder must return Reply, str or a sequence of them: {value!r}")
    return replies


def fill_placeholders(text: str, values: Mapping[str, object]) -> str:
    for name in PLACEHOLDERS:
        if name in text:
            text = text.replace(name, str(values[name[1:-1]]))
    return text


def format_text_tool_call(call: ToolCall) -> str:
    """Render a tool call in the raw-text protocol used by text backends."""
    args = call.arguments if isinstance(call.arguments, Mapping) else json.loads(call.arguments)
    params = "".join(
        f"<parameter={k}>\n{v if isinstance(v, str) else json.dumps(v)}\n</parameter>\n"
        for k, v in args.items()
    )
    return f"<tool_call>\n<function={call.name}>\n{params}</function>\n</tool_call>"


def estimate_tokens(text: str | None) -> int:
    """Deterministic token estimate: one token per 4 characters, rounded up."""
    return (len(text) + 3) // 4 if text else 0


def content_text(content: Any) -> str:
    """Text of an OpenAI message ``content`` (a string or a list of typed parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def last_user_text(body: Mapping[str, Any]) -> str:
    """The last user message (chat) or the prompt (completions)."""
    if "prompt" in body:
        prompt = body["prompt"]
        return prompt[-1] if isinstance(prompt, list) and prompt else str(prompt)
    for msg in reversed(body.get("messages") or []):
        if isinstance(msg, dict) and msg.get("role") == "user":
            return content_text(msg.get("content"))
    return ""


class TemplateResponder:
    """Always the same (templated) answer."""

    def __init__(self, text: str = DEFAULT_ANSWER) -> None:
        self.text = text

    def __call__(self, body: dict[str, Any]) -> Reply:
        return Reply(text=self.text, template=True)


class AnswerMapResponder:
    """First pattern found in the last user message wins; else the default text.

    Keys are substrings, compiled ``re.Pattern`` objects, or strings starting with
    ``re:`` (a regex, handy in JSON files). Values are reply texts or ``Reply`` objects.
    """

    def __init__(
        self,
        answers: Mapping[str | re.Pattern[str], str | Reply],
        default: str = DEFAULT_ANSWER,
    ) -> None:
        self.rules = [(_compile(k), v) for k, v in answers.items()]
        self.default = default

    def __call__(self, body: dict[str, Any]) -> Reply:
        text = last_user_text(body)
        for pattern, reply in self.rules:
            hit = pattern.search(text) if isinstance(pattern, re.Pattern) else pattern in text
            if hit:
                return reply if isinstance(reply, Reply) else Reply(text=reply, template=True)
        return Reply(text=self.default, template=True)


def _compile(key: str | re.Pattern[str]) -> str | re.Pattern[str]:
    if isinstance(key, str) and key.startswith("re:"):
        return re.compile(key[3:])
    return key


Turn = Reply | str | Callable[[str | None, dict[str, Any]], Reply | str]

_TOOL_RESPONSE = re.compile(r"<tool_response>\s*(.*?)\s*</tool_response>", re.S)


class ScriptedToolModel:
    """A multi-turn model: turn ``k`` is chosen by counting assistant turns so far.

    Each turn is a ``Reply``, a string, or ``fn(observation, request_json)`` where
    ``observation`` is the latest tool output in the request (``None`` on turn 0).
    ``protocol="text"`` renders tool calls as raw ``<tool_call>`` text in the content
    (for text backends) instead of native ``tool_calls``.
    """

    def __init__(self, turns: Sequence[Turn], protocol: str = "native") -> None:
        if protocol not in ("native", "text"):
            raise ValueError(f"protocol must be 'native' or 'text', got {protocol!r}")
        self.turns = list(turns)
        self.protocol = protocol

    def __call__(self, body: dict[str, Any]) -> Reply:
        index = turn_index(body)
        if index >= len(self.turns):
            # Visible failure rather than looping: the client asked for a turn past the end.
            return Reply(text=f"[ScriptedToolModel: no turn {index}]")
        turn = self.turns[index]
        if callable(turn) and not isinstance(turn, Reply):
            turn = turn(observation(body), body)
        reply = Reply(text=turn) if isinstance(turn, str) else turn
        if self.protocol == "text" and reply.tool_calls:
            rendered = "\n".join(format_text_tool_call(c) for c in reply.tool_calls)
            reply = Reply(text=f"{reply.text}\n{rendered}" if reply.text else rendered)
        return reply


def turn_index(body: Mapping[str, Any]) -> int:
    """Assistant turns already in the conversation (tool-call blocks for a bare prompt)."""
    if "prompt" in body:
        return str(body["prompt"]).count("</tool_call>")
    messages = body.get("messages") or []
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")


def observation(body: Mapping[str, Any]) -> str | None:
    """Latest tool output: a ``tool`` message, else text after the last assistant turn."""
    if "prompt" in body:
        prompt = str(body["prompt"])
        found = _TOOL_RESPONSE.findall(prompt)
        return found[-1] if found else None
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    last_assistant = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=None)
    if last_assistant is None:
        return None
    for msg in reversed(messages[last_assistant + 1 :]):
        if msg.get("role") in ("tool", "user"):
            text = content_text(msg.get("content"))
            found = _TOOL_RESPONSE.findall(text)
            return found[-1] if found else text
    return None
