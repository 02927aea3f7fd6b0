"""Pull the final answer out of an agent's raw output.

The official scorer scores ``model_answer`` as submitted; extracting it from
free text is the submitter's job. Order, first hit wins:

1. ``final_answer`` -- the GAIA template ``FINAL ANSWER:`` (any case, also
   ``Final Answer：`` with a full-width colon), last occurrence in the text.
2. ``answer_label`` -- ``Answer:``, ``答案：`` or ``最终答案：`` (ASCII or
   full-width colon), last occurrence.
3. ``last_line`` -- the last non-empty line.
4. ``none`` -- the output is empty or whitespace only (answer ``None``).

For a marker, the answer is the rest of that line; when the rest is empty
(``FINAL ANSWER:`` followed by a newline) it is the next non-empty line. A
marker whose answer is empty (nothing after it at all) is skipped in favour
of the previous one. The answer is stripped of whitespace, then of wrappers a
model commonly echoes from the template or Markdown: one pair of surrounding
``[ ]`` (``[YOUR FINAL ANSWER]``), ``*``/``__``/backtick emphasis. Nothing
else is changed (no trailing-period removal): the official scorer decides
what formatting counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Method = Literal["final_answer", "answer_label", "last_line", "none"]

# ``[ \t*]*`` lets Markdown bold sit between the words and the colon.
_FINAL_ANSWER = re.compile(r"(?<![A-Za-z])final[ \t_]*answer[ \t*]*[:：]", re.IGNORECASE)
_ANSWER_LABEL = re.compile(r"(?<![A-Za-z])answer[ \t*]*[:：]|(?:最终)?答案[ \t*]*[:：]", re.IGNORECASE)
_PAIRED_WRAPPERS = ("__", "`")


@dataclass(frozen=True)
class ExtractedAnswer:
    """The extracted answer, how it was found, and the untouched raw output."""

    answer: str | None
    method: Method
    raw: str


def extract_final_answer(raw: str | None) -> ExtractedAnswer:
    """Extract the answer from ``raw`` (see the module docstring for the order)."""
    text = raw or ""
    answer = _after_last_marker(text, _FINAL_ANSWER)
    if answer is not None:
        return ExtractedAnswer(answer, "final_answer", text)
    answer = _after_last_marker(text, _ANSWER_LABEL)
    if answer is not None:
        return ExtractedAnswer(answer, "answer_label", text)
    lines = [line for line in text.splitlines() if line.strip()]
    if lines:
        return ExtractedAnswer(clean_answer(lines[-1]), "last_line", text)
    return ExtractedAnswer(None, "none", text)


def clean_answer(text: str) -> str:
    """Strip whitespace, Markdown emphasis and one pair of surrounding brackets.

    Leading/trailing ``*`` runs go even when unbalanced (``**FINAL ANSWER:** x``
    leaves ``** x``); ``__`` and backticks only as a surrounding pair; ``[ ]``
    only when the brackets enclose the whole answer (``[a], [b]`` is kept).
    """
    answer = text.strip()
    previous = None
    while answer != previous:
        previous = answer
        answer = answer.strip("*").strip()
        for wrapper in _PAIRED_WRAPPERS:
            size = len(wrapper)
            if len(answer) >= 2 * size and answer.startswith(wrapper) and answer.endswith(wrapper):
                answer = answer[size:-size].strip()
    inner = answer[1:-1]
    if len(answer) >= 2 and answer[0] == "[" and answer[-1] == "]" and not set("[]") & set(inner):
        answer = inner.strip()
    return answer


def _after_last_marker(text: str, pattern: re.Pattern[str]) -> str | None:
    """The non-empty answer after the last marker that has one, else None."""
    for match in reversed(list(pattern.finditer(text))):
        rest_of_line, _, following = text[match.end() :].partition("\n")
        answer = clean_answer(rest_of_line)
        if not answer:
            next_line = next((line for line in following.splitlines() if line.strip()), "")
            answer = clean_answer(next_line)
        if answer:
            return answer
    return None
