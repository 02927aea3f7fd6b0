"""The options reference, docs/options.md, generated from the table:
`python -m pytest_agenteval.config.reference > docs/options.md`."""

from __future__ import annotations

import re
import sys
from typing import Any

from pytest_agenteval.config.option import Option, describe_tag
from pytest_agenteval.config.table import OPTIONS

COMMAND = "python -m pytest_agenteval.config.reference > docs/options.md"

INTRO = f"""\
# Options

<!-- Generated from pytest_agenteval/config/table.py by `{COMMAND}`.
Do not edit: tests/core/test_options.py fails when this file differs from the generator's output. -->

Every option is a command-line flag and an ini key of the same name: the flag without its
leading dashes, dashes as underscores. `--val-n 4` on the command line is `val_n = 4` under
`[pytest]` in pytest.ini, tox.ini or setup.cfg (`[tool.pytest.ini_options]` in
pyproject.toml). The command line wins over the ini file. Each `##` section below is one
group of `pytest --help` (`agenteval: model`, `agenteval: sampling`, ...), in the same order.

- A `bool` option is a flag on the command line (`--serve`); in the ini file write `true` or
  `false`.
- A repeatable option takes one value per flag on the command line (`--endpoint A --endpoint B`)
  and one value per line in the ini file.
- A default of none means the option is off, or its help says what is used instead.
- Suites: the suites (and AIME modes) an option has an effect on. An option you set while
  none of them is selected is a start-up warning naming the option that does its job there,
  e.g. `--max-tokens has no effect on the selected suites (aime25 in retool mode uses
  --max-assistant-tokens)`.
"""


def _cell(text: str) -> str:
    """Help text as one Markdown table cell: `|` would end the cell, `*` start emphasis and
    `<name>` be read as an HTML tag."""
    text = re.sub(r"([\\|*])", r"\\\1", text)
    return re.sub(r"<(?=[A-Za-z/!?])", "&lt;", text)


def _type(option: Option) -> str:
    name = option.type.__name__
    if option.choices:
        return "one of " + ", ".join(f"`{choice}`" for choice in option.choices)
    return f"{name}, repeatable" if option.multiple else name


def _default(value: Any) -> str:
    if value is None or value == ():
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def _applies(option: Option) -> str:
    if not option.applies_to:
        return "all"
    return ", ".join(describe_tag(tag) for tag in option.applies_to)


def _row(option: Option) -> str:
    cells = (
        f"`{option.flag}`",
        f"`{option.ini}`",
        _type(option),
        _default(option.default),
        _applies(option),
        _cell(option.help),
    )
    return "| " + " | ".join(cells) + " |"


HEADER = "| Flag | Ini key | Type | Default | Suites | Help |\n| --- | --- | --- | --- | --- | --- |"


def render() -> str:
    """The whole reference: a section per --help group, one table per topic in it (under
    its own heading, unless the topic is the group's title)."""
    parts = [INTRO]
    for group in dict.fromkeys(option.group for option in OPTIONS):
        title = group[0].upper() + group[1:]
        parts.append(f"## {title}\n")
        members = [option for option in OPTIONS if option.group == group]
        for topic in dict.fromkeys(option.topic for option in members):
            heading = "" if topic == title else f"### {topic}\n\n"
            rows = [_row(option) for option in members if option.topic == topic]
            parts.append(f"{heading}{HEADER}\n" + "\n".join(rows) + "\n")
    return "\n".join(parts)


def main() -> None:
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
