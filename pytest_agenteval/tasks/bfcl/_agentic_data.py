"""Load the official BFCL v4 agentic entries: memory (kv, vector, rec_sum) and web search
(base, no_snippet).

As the official loader does (``process_memory_test_case``, ``process_web_search_test_case``,
``process_agentic_test_case``): every question is asked once per memory backend / web-search
variant, with the category in its id (``memory_kv_0-customer-0``, ``web_search_base_3``);
questions get the agentic answer-format system prompt; memory questions depend on their
scenario's prerequisite conversations (``memory_prereq_conversation/``), which the model
plays first to fill its memory. The answer is correct when it contains one of the
possible answers (``agentic_checker``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agenteval.tasks.bfcl._data import VERSION_PREFIX, BfclDataError, _read_jsonl
from pytest_agenteval.tasks.markers import BFCL_MEMORY_CATEGORIES, BFCL_WEB_SEARCH_CATEGORIES

# bfcl-eval's ADDITIONAL_SYSTEM_PROMPT_FOR_AGENTIC_RESPONSE_FORMAT (constants/default_prompts.py).
AGENTIC_RESPONSE_FORMAT = (
    "For your final answer to the user, you must respond in this format: {'answer': A short and "
    "precise answer to the question, 'context': A brief explanation of how you arrived at this answer "
    "or why it is correct}. If you do not know the answer, respond with {'answer': 'I do not know', "
    "'context': 'I do not know'}. If you think the question cannot be properly answered, response "
    "with {'answer': 'I cannot answer this question', 'context': A short reason explaining why this "
    "question cannot be answered}.\n"
)
MEMORY_SCENARIOS = ("student", "customer", "finance", "healthcare", "notetaker")


@dataclass(frozen=True)
class Conversation:
    """One prerequisite conversation of a memory scenario (played, not scored)."""

    id: str
    question: list[list[dict[str, Any]]]


@dataclass(frozen=True)
class AgenticEntry:
    """One memory or web-search question.

    ``environment``: the official class that serves its functions
    (``MemoryAPI_kv``, ``WebSearchAPI``, ...). ``answers``: the possible answers.
    ``prerequisites``: the memory scenario's conversations, in order.
    """

    id: str
    category: str
    question: list[list[dict[str, Any]]]
    functions: list[dict[str, Any]]
    environment: str
    answers: list[str]
    scenario: str | None = None
    prerequisites: tuple[Conversation, ...] = ()
    language: str = "python"

    @property
    def ground_truth(self) -> list[str]:
        return self.answers


def load_agentic(root: Path, category: str) -> list[AgenticEntry]:
    if category in BFCL_MEMORY_CATEGORIES:
        return _load_memory(root, category)
    if category in BFCL_WEB_SEARCH_CATEGORIES:
        return _load_web_search(root, category)
    raise BfclDataError(f"{category} is not an agentic category")


def _load_memory(root: Path, category: str) -> list[AgenticEntry]:
    backend = category.removeprefix("memory_")
    environment = f"MemoryAPI_{backend}"
    functions = _read_jsonl(root / "multi_turn_func_doc" / f"memory_{backend}.json")
    chains = {scenario: tuple(_prerequisites(root, category, scenario)) for scenario in MEMORY_SCENARIOS}
    entries = []
    for prompt, answer in _paired(root, "memory"):
        scenario = prompt["scenario"]
        entries.append(
            AgenticEntry(
                id=prompt["id"].replace("memory", category, 1),
                category=category,
                question=_with_answer_format(prompt["question"]),
                functions=json.loads(json.dumps(functions)),
                environment=environment,
                answers=list(answer["ground_truth"]),
                scenario=scenario,
                prerequisites=chains[scenario],
            )
        )
    return entries


def _prerequisites(root: Path, category: str, scenario: str) -> list[Conversation]:
    rows = _read_jsonl(root / "memory_prereq_conversation" / f"memory_{scenario}.json")
    return [Conversation(row["id"].replace("memory", category, 1), row["question"]) for row in rows]


def _load_web_search(root: Path, category: str) -> list[AgenticEntry]:
    functions = _read_jsonl(root / "multi_turn_func_doc" / "web_search.json")
    return [
        AgenticEntry(
            id=prompt["id"].replace("web_search", category, 1),
            category=category,
            question=_with_answer_format(prompt["question"]),
            functions=json.loads(json.dumps(functions)),
            environment="WebSearchAPI",
            answers=list(answer["ground_truth"]),
        )
        for prompt, answer in _paired(root, "web_search")
    ]


def _paired(root: Path, name: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    prompts = _read_jsonl(root / f"{VERSION_PREFIX}_{name}.json")
    answers = _read_jsonl(root / "possible_answer" / f"{VERSION_PREFIX}_{name}.json")
    if [a.get("id") for a in answers] != [p.get("id") for p in prompts]:
        raise BfclDataError(f"{name}: prompt and possible_answer ids differ: re-install bfcl-eval")
    return list(zip(prompts, answers, strict=True))


def _with_answer_format(question: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    turns = json.loads(json.dumps(question))
    turns[0].insert(0, {"role": "system", "content": AGENTIC_RESPONSE_FORMAT})
    return turns
