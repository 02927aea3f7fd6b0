"""LaTeX backslashes inside JSON strings: repair before decoding, record every repair.

A generator that writes `"\\frac{1}{2}"` with one backslash produces valid-looking JSON in
which `\\f` decodes to a form feed (`\\boxed` -> backspace, `\\times` -> tab, `\\neq` ->
newline, `\\right` -> carriage return), and `\\sqrt` or `\\underline` fail to decode at
all. The design documents' regex leaves the first kind corrupted. Here, inside string literals, a
backslash followed by the maximal run of letters that is a known TeX control word is
escaped; `\\n` before anything else stays a JSON newline ("\\nThe" is a line break)."""

from __future__ import annotations

import json
from dataclasses import dataclass

# Control words whose first letter is a JSON escape (b f n r t u): only these are
# ambiguous. Any other backslash that is not a valid JSON escape is repaired anyway.
TEX_WORDS = frozenset(
    """
    b bar beta binom boxed bmod big bigl bigr bigg biggl biggr bf bullet backslash bot
    bigcup bigcap bigoplus because bmatrix begin bar boldsymbol
    frac forall flat frak
    neq ne nabla nu not ni neg nmid nleq ngeq newline nonumber notin nsubseteq
    right rho rangle rceil rfloor rightarrow rm rbrace rvert rVert
    times theta text tan tau to tfrac textbf textit tilde triangle top therefore tanh
    textrm texttt tbinom textstyle tiny
    underline uparrow upsilon underbrace unlhd
    """.split()
)
TEX_WORDS = TEX_WORDS - {"b"}  # a lone \b is JSON's backspace, not TeX
JSON_ESCAPES = '"\\/bfnrtu'
HEX = frozenset("0123456789abcdefABCDEF")
CORRUPTING = {"\x08": "\\b", "\x0c": "\\f", "\t": "\\t", "\r": "\\r"}


@dataclass(frozen=True)
class Repair:
    """One backslash escaped before decoding: where, what followed it, and why."""

    offset: int  # in the original text
    command: str  # the backslash and what followed it, e.g. "\\frac"
    kind: str  # "tex_control_word" | "invalid_escape" | "bad_unicode_escape"

    def as_dict(self) -> dict[str, object]:
        return {"offset": self.offset, "command": self.command, "kind": self.kind}


def _letters(text: str, start: int) -> str:
    end = start
    while end < len(text) and text[end].isascii() and text[end].isalpha():
        end += 1
    return text[start:end]


def _classify(text: str, i: int) -> tuple[str | None, int]:
    """At a backslash inside a string: (repair kind or None, characters consumed)."""
    nxt = text[i + 1] if i + 1 < len(text) else ""
    if nxt in ('"', "\\", "/"):
        return None, 2
    if nxt == "u":
        word = _letters(text, i + 1)
        if word in TEX_WORDS:
            return "tex_control_word", 1
        if len(text) >= i + 6 and all(c in HEX for c in text[i + 2 : i + 6]):
            return None, 6
        return "bad_unicode_escape", 1
    if nxt in "bfnrt" and nxt != "":
        word = _letters(text, i + 1)
        return ("tex_control_word", 1) if word in TEX_WORDS else (None, 2)
    return "invalid_escape", 1


def repair_json_text(text: str) -> tuple[str, list[Repair]]:
    """The text with ambiguous or invalid backslashes inside string literals doubled.
    Outside strings nothing changes (a stray backslash there is a syntax error anyway)."""
    out: list[str] = []
    repairs: list[Repair] = []
    in_string = False
    i = 0
    while i < len(text):
        char = text[i]
        if not in_string:
            in_string = char == '"'
            out.append(char)
            i += 1
            continue
        if char == '"':
            in_string = False
            out.append(char)
            i += 1
            continue
        if char != "\\":
            out.append(char)
            i += 1
            continue
        kind, consumed = _classify(text, i)
        if kind is None:
            out.append(text[i : i + consumed])
            i += consumed
            continue
        command = "\\" + (_letters(text, i + 1) or text[i + 1 : i + 2])
        repairs.append(Repair(i, command, kind))
        out.append("\\\\")
        i += 1
    return "".join(out), repairs


def loads_repaired(text: str) -> tuple[object, list[Repair]]:
    """json.loads after repair; raises json.JSONDecodeError when still not JSON."""
    fixed, repairs = repair_json_text(text)
    return json.loads(fixed), repairs


def corrupted_characters(value: str) -> list[str]:
    """Control characters that a LaTeX command decoded into (kept out of math fields:
    a backspace or form feed in a problem is always corruption, never intent)."""
    return sorted({CORRUPTING[c] for c in value if c in ("\x08", "\x0c")})
