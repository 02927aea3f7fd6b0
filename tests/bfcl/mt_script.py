"""A scripted model that plays BFCL multi-turn entries through the OpenAI test server.

At step 0 of each turn it answers with that turn's ground-truth calls
(positional arguments turned into keywords with the environment method's
signature, since the official decoders keep keywords only), as text or as
native tool calls; at the next step it says it is done, which ends the turn.
``wrong`` entries get one call with a wrong argument instead, so verdicts can fail.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterable
from typing import Any

from pytest_agenteval.tasks.bfcl._mt_data import MultiTurnEntry
from pytest_agenteval.tasks.bfcl._mt_env import Environment
from pytest_agenteval.tasks.bfcl._mt_rollout import ADDED_FUNCTIONS_FC, ADDED_FUNCTIONS_PROMPTING
from pytest_agenteval.tasks.bfcl._prompt import prompt_messages
from pytest_agenteval.testing import Reply, ToolCall

DONE = "I have completed the request."
_RESULTS_PREFIX = "[{'role': 'tool'"  # the prompting style's execution-results message


def keyword_calls(entry: MultiTurnEntry) -> list[list[tuple[str, dict[str, Any]]]]:
    """Each turn's ground truth as (name, keyword arguments)."""
    env = Environment(entry.involved_classes, entry.initial_config, entry.long_context)
    turns = []
    for turn in entry.ground_truth:
        calls = []
        for source in turn:
            node = ast.parse(source, mode="eval").body
            name = node.func.id
            names = list(inspect.signature(env.methods[name]).parameters)
            kwargs = {names[i]: ast.literal_eval(a) for i, a in enumerate(node.args)}
            kwargs.update({kw.arg: ast.literal_eval(kw.value) for kw in node.keywords})
            calls.append((name, kwargs))
        turns.append(calls)
    return turns


class GroundTruthModel:
    """The responder. An entry is recognised by the user messages of its turns so far
    and the functions it was given (entries of different categories share questions)."""

    def __init__(self, entries: Iterable[MultiTurnEntry], wrong: Iterable[str] = ()) -> None:
        self.entries = list(entries)
        wrong = set(wrong)
        self.plans = {}
        for entry in self.entries:
            plan = keyword_calls(entry)
            if entry.id in wrong:
                plan = [[(name, {**kw, "wrong_argument": 1}) for name, kw in t] for t in plan]
            self.plans[entry.id] = plan
        self.systems = {entry.id: prompt_messages(entry)[0]["content"] for entry in self.entries}

    def __call__(self, request: dict[str, Any]) -> Reply:
        messages = request["messages"]
        turn_starts = [i for i, m in enumerate(messages) if _is_turn_message(m)]
        entry = self._recognise(request, [messages[i]["content"] for i in turn_starts])
        if entry is None:
            return Reply(text="unknown entry")
        plan = self.plans[entry.id]
        turn, since = len(turn_starts) - 1, messages[turn_starts[-1] + 1 :]
        step = sum(1 for m in since if m["role"] == "assistant")
        calls = plan[turn] if turn < len(plan) else []
        if step > 0 or not calls:
            return Reply(text=DONE)
        if request.get("tools"):
            return Reply(tool_calls=tuple(ToolCall(name, kwargs) for name, kwargs in calls))
        rendered = ", ".join(f"{n}({', '.join(f'{k}={v!r}' for k, v in kw.items())})" for n, kw in calls)
        return Reply(text=f"[{rendered}]")

    def _recognise(self, request: dict[str, Any], user_turns: list[str]) -> MultiTurnEntry | None:
        native = bool(request.get("tools"))
        system = request["messages"][0]["content"] if request["messages"][0]["role"] == "system" else None
        for entry in self.entries:
            expected = turn_messages(entry, native)
            if expected[: len(user_turns)] != user_turns:
                continue
            if native or system == self.systems[entry.id]:
                return entry
        return None


def turn_messages(entry: MultiTurnEntry, native: bool) -> list[str]:
    """The user message that opens each turn of ``entry``, as the rollout sends it."""
    contents = []
    for index, turn in enumerate(entry.question):
        if index in entry.missed_functions:
            docs = entry.missed_functions[index]
            contents.append(
                ADDED_FUNCTIONS_FC if native else ADDED_FUNCTIONS_PROMPTING.format(functions=docs)
            )
        else:
            contents.append("\n".join(m["content"] for m in turn if m["role"] == "user"))
    return contents


def _is_turn_message(message: dict[str, Any]) -> bool:
    content = message.get("content") or ""
    return message["role"] == "user" and not content.startswith(_RESULTS_PREFIX)
