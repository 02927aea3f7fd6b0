"""LaTeX repair inside JSON strings: every command of notes/judges.md 1.11, and the JSON
escapes that must stay what they are."""

from __future__ import annotations

import json

import pytest

from pytest_agenteval.tasks.datagen import corrupted_characters, loads_repaired, repair_json_text

# json.loads turns these into control characters without complaint
SILENTLY_CORRUPTED = [
    "frac", "boxed", "beta", "binom", "bar", "times", "theta", "tan", "text",
    "neq", "nabla", "nu", "right", "rho", "rangle",
]  # fmt: skip
# json.loads raises "Invalid \escape" (or "Invalid \uXXXX escape") on these
REJECTED = ["sqrt", "cdot", "alpha", "pi", "le", "dfrac", "{", "lfloor", "pmod", "equiv", "underline"]


def _line(command: str) -> str:
    return '{"problem": "x = \\' + command + '{1}{2}"}'


@pytest.mark.parametrize("command", SILENTLY_CORRUPTED)
def test_a_command_json_would_corrupt_is_kept_as_latex(command: str) -> None:
    assert json.loads(_line(command))["problem"] != "x = \\" + command + "{1}{2}"  # corrupted
    value, repairs = loads_repaired(_line(command))
    assert value == {"problem": "x = \\" + command + "{1}{2}"}
    assert [(r.command, r.kind) for r in repairs] == [("\\" + command, "tex_control_word")]


@pytest.mark.parametrize("command", REJECTED)
def test_a_command_json_rejects_is_repaired_and_recorded(command: str) -> None:
    with pytest.raises(json.JSONDecodeError):
        json.loads(_line(command))
    value, repairs = loads_repaired(_line(command))
    assert value == {"problem": "x = \\" + command + "{1}{2}"}
    kind = "tex_control_word" if command == "underline" else "invalid_escape"  # \u + "nder"
    assert len(repairs) == 1 and repairs[0].kind == kind


@pytest.mark.parametrize(
    ("raw", "decoded"),
    [
        ('"a\\nThe answer"', "a\nThe answer"),  # a real newline escape stays one
        ('"tab\\there"', "tab\there"),  # "there" is not a TeX word
        ('"\\u00e9t\\u00e9"', "été"),
        ('"quote \\" and slash \\/ and \\\\"', 'quote " and slash / and \\'),
        ('"already \\\\frac{1}{2}"', "already \\frac{1}{2}"),  # escaped correctly: untouched
    ],
)
def test_valid_json_escapes_are_not_touched(raw: str, decoded: str) -> None:
    fixed, repairs = repair_json_text(raw)
    assert json.loads(fixed) == decoded
    assert repairs == []


def test_backslashes_outside_strings_are_left_for_the_parser_to_reject() -> None:
    fixed, repairs = repair_json_text('{"a": 1} \\frac')
    assert fixed == '{"a": 1} \\frac' and repairs == []


def test_the_boxed_answer_survives_repair() -> None:
    value, repairs = loads_repaired('{"answer": "\\boxed{7}", "solution": "so \\frac{14}{2} = \\boxed{7}"}')
    assert value == {"answer": "\\boxed{7}", "solution": "so \\frac{14}{2} = \\boxed{7}"}
    assert [r.command for r in repairs] == ["\\boxed", "\\frac", "\\boxed"]


def test_control_characters_left_in_a_field_are_flagged() -> None:
    assert corrupted_characters("x\x0crac{1}{2} and \x08oxed") == ["\\b", "\\f"]
    assert corrupted_characters("plain\nnewline\tand tab") == []
