"""The ReTool lab's protocol, reproduced exactly (its protocol.py and sandbox.py):
the system prompt and tool schema models were trained with, the parser of one
`<tool_call>` per turn, the tool message, and what the sandbox result becomes."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

# Benchmark protocol constants: byte for byte the lab's protocol.py (CODE_TOOL, SYSTEM_PROMPT).
CODE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "code_interpreter",
        "description": (
            "A Python code execution environment that allows you to:\n"
            "- Run Python code for calculations, data analysis, and other computational tasks\n"
            "- Get results through the `print()` function output\n"
            "- Execute code in an isolated environment (each execution starts fresh)\n\n"
            "Important notes:\n"
            "- Results are captured from `print()` statements\n"
            "- Returns empty string if no output is printed\n"
            "- Each execution is independent (no state persistence between runs)"
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "code": {
                    "type": "string",
                    "description": "The Python code to be executed.",
                }
            },
            "required": ["code"],
        },
    },
}

SYSTEM_PROMPT = """You solve math problems step by step with help from a Python code interpreter.
Use the code_interpreter tool when calculation, symbolic manipulation, or enumeration helps you solve the problem accurately and quickly.

How to use the code_interpreter tool:
- Call code_interpreter with a `code` string containing Python code. Call it at most once per assistant turn, then wait for the execution result.
- Results are captured from what your code prints with print(). Always print the values you want to see.
- Each execution is independent: no variables, files, or state carry over between calls. Redefine everything you need in each piece of code.
- Code must finish within a few seconds and use little memory. Do not read or write files. If you enumerate or brute-force, keep the search space small.
- If the execution returns an error, analyze it and retry with corrected code when useful.

When you have the final answer, end with exactly one line in this format:
\\boxed{<your final answer>}
Do not call the tool and give the final answer in the same turn."""

TOOL_NAME = "code_interpreter"
TOOL_CALL_PATTERN = re.compile(
    r"<tool_call>\s*<function=code_interpreter>\s*<parameter=code>\s*(.*?)\s*"
    r"</parameter>\s*</function>\s*</tool_call>",
    re.DOTALL,
)


@dataclass(frozen=True)
class ParsedAssistant:
    """One assistant turn: "tool" (one code call), "answer", or "invalid"."""

    kind: str
    content: str  # the prose before the call, or the whole (stripped) turn
    code: str | None = None


def initial_messages(problem: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": problem}]


def parse_assistant(text: str) -> ParsedAssistant:
    """The lab's parser: a call is exactly one fully closed `<tool_call>` with nothing after
    it and non-empty code; any other `<tool_call>` makes the turn invalid; a turn without
    one is an answer (the prompt's "no call and answer in one turn" is not enforced)."""
    matches = list(TOOL_CALL_PATTERN.finditer(text))
    if not matches:
        kind = "invalid" if "<tool_call>" in text else "answer"
        return ParsedAssistant(kind=kind, content=text.strip())
    if len(matches) != 1 or text[matches[0].end() :].strip():
        return ParsedAssistant(kind="invalid", content=text.strip())
    code = matches[0].group(1).strip()
    if not code:
        return ParsedAssistant(kind="invalid", content=text.strip())
    return ParsedAssistant(kind="tool", content=text[: matches[0].start()].strip(), code=code)


def native_call_text(content: str, calls: tuple[Any, ...]) -> str:
    """A chat endpoint's `tool_calls` written back as the raw call the template would have
    carried, so native and raw turns go through the one parser. A call whose arguments are
    not a JSON object with a `code` string becomes an unparseable (invalid) call."""
    parts = [content.strip()] if content.strip() else []
    for call in calls:
        try:
            arguments = json.loads(call.arguments or "{}")
        except json.JSONDecodeError:
            arguments = None
        code = arguments.get("code") if isinstance(arguments, dict) else None
        if call.name != TOOL_NAME or not isinstance(code, str):
            parts.append(f"<tool_call>\n<function={call.name}>\n{call.arguments}\n</function>\n</tool_call>")
        else:
            parts.append(
                f"<tool_call>\n<function={TOOL_NAME}>\n<parameter=code>\n{code}\n</parameter>\n"
                "</function>\n</tool_call>"
            )
    return "\n".join(parts)


def tool_message(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "name": TOOL_NAME, "content": content}


# sandbox.py: template markers in tool output would break the observation's structure
_SANITIZE = {
    "<|im_start|>": "< im_start >",
    "<|im_end|>": "< im_end >",
    "<tool_response>": "< tool_response >",
    "</tool_response>": "< /tool_response>",
}
STREAM_CHARS = 4096  # sandbox.py MAX_OUTPUT_CHARS: the tail of each stream is kept


def sanitize_tool_content(text: str) -> str:
    for marker, replacement in _SANITIZE.items():
        text = text.replace(marker, replacement)
    return text


def stream_tail(text: str, limit: int = STREAM_CHARS) -> str:
    """sandbox.py `_truncate_tail`: the last `limit` characters after a marker line."""
    if len(text) <= limit:
        return text
    return f"[... truncated {len(text) - limit} chars ...]\n{text[-limit:]}"


def tool_content(result: Any, timeout_s: float) -> str:
    """sandbox.py `format_tool_content`: stdout on success (empty when nothing was printed),
    stderr on failure, else the lab's timeout or exit-code line."""
    if result.status == "timeout":
        return f"Error: execution timed out after {timeout_s:.0f} seconds."
    if result.status == "ok":
        return sanitize_tool_content(stream_tail(result.raw_stdout))
    if result.raw_stderr:
        return sanitize_tool_content(stream_tail(result.raw_stderr))
    code = result.exit_code if result.exit_code is not None else -(result.signal or 9)
    return f"Error: process exited with code {code}."


TRUNCATION_MARKER = "[... truncated ...]\n"
MIN_SHRINK_CHARS = 64


async def fit_tool_content(content: str, max_tokens: int, count: Any, fits: Any) -> str | None:
    """rollout.py `fit_tool_content`: keep the tail, cutting 30% at a time (the marker
    counts), until `await count(content) <= max_tokens` and `await fits(content)` (the next prompt
    within the trajectory budget); None once 64 characters or fewer still do not fit.
    Fix: None also when a cut no longer changes the text. The lab's loop never ends there
    (at 65-66 characters the marker plus 70% can be the very same text again)."""
    while True:
        if await count(content) <= max_tokens and await fits(content):
            return content
        if len(content) <= MIN_SHRINK_CHARS:
            return None
        shorter = TRUNCATION_MARKER + content[-int(len(content) * 0.7) :]
        if shorter == content:
            return None
        content = shorter
