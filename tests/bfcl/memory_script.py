"""A scripted model for BFCL memory (prompting style), through the OpenAI test server.

In the prerequisite conversations it stores every sentence that holds one of the
scenario's answers (kv: ``archival_memory_add``; rec_sum: ``memory_append``). Asked a
question, it reads its memory back (kv: list the keys, then retrieve them; rec_sum:
``memory_retrieve``) and answers only with what it finds there, so a correct answer
shows that the memory went from the conversations to the question.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable
from typing import Any

from pytest_agenteval.tasks.bfcl._agentic_data import AgenticEntry

_RESULTS_PREFIX = "[{'role': 'tool'"
UNKNOWN = "{'answer': 'I do not know', 'context': 'I do not know'}"


class MemoryModel:
    def __init__(self, entries: Iterable[AgenticEntry]) -> None:
        entries = list(entries)
        self.answers = {_user_text(e.question[0]): e.answers for e in entries}
        self.facts = sorted({a.lower() for e in entries for a in e.answers if len(a) > 2}, key=len)

    def __call__(self, request: dict[str, Any]) -> str:
        messages = request["messages"]
        system = messages[0]["content"]
        starts = [i for i, m in enumerate(messages) if m["role"] == "user" and not _is_results(m)]
        step = sum(1 for m in messages[starts[-1] + 1 :] if m["role"] == "assistant")
        kv = "Core Memory" in system
        question = messages[starts[-1]]["content"]
        if "For your final answer to the user" not in system:
            return self._remember(question, kv) if step == 0 else "Noted."
        return self._answer(messages, question, step, kv)

    def _remember(self, text: str, kv: bool) -> str:
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", text) if any(f in s.lower() for f in self.facts)]
        if not sentences:
            return "Noted."
        if kv:
            calls = [f"archival_memory_add(key='fact_{_key(s)}', value={s[:1900]!r})" for s in sentences]
        else:
            calls = [f"memory_append(text={s[:400]!r})" for s in sentences]
        return "[" + ", ".join(calls) + "]"

    def _answer(self, messages: list[dict[str, Any]], question: str, step: int, kv: bool) -> str:
        if step == 0:
            return "[archival_memory_list_keys()]" if kv else "[memory_retrieve()]"
        if kv and step == 1:
            keys = sorted(set(re.findall(r"fact_\d+", messages[-1]["content"])))
            if keys:
                return "[" + ", ".join(f"archival_memory_retrieve(key='{k}')" for k in keys) + "]"
        seen = " ".join(m["content"] for m in messages[1:] if _is_results(m)).lower()
        for answer in self.answers.get(question, []):
            if answer.lower() in seen:
                return f"{{'answer': {answer!r}, 'context': 'from my memory'}}"
        return UNKNOWN


def _key(sentence: str) -> int:
    return zlib.crc32(sentence.encode())


def _is_results(message: dict[str, Any]) -> bool:
    return message["role"] == "user" and (message.get("content") or "").startswith(_RESULTS_PREFIX)


def _user_text(turn: list[dict[str, Any]]) -> str:
    return next(m["content"] for m in turn if m["role"] == "user")
