"""The options as pytest sees them: `register` adds every flag and ini key of the table, and
`build_settings` reads them into one frozen `Settings` on every process: the command line,
else the ini key (the flag's own name), else the --agenteval-preset's value, else the
table's default."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import pytest

from pytest_agenteval.config.option import Option, describe_tag
from pytest_agenteval.config.presets import apply_preset
from pytest_agenteval.config.settings import Settings, one_model_path
from pytest_agenteval.config.table import OPTIONS

__all__ = ["GROUP", "OPTIONS", "Option", "Settings", "build_settings", "register", "unused_options"]

GROUP = "agenteval"


def _dest(option: Option) -> str:
    """The argparse destination: `config.getoption` name."""
    return f"agenteval_{option.dest}"


def help_text(option: Option) -> str:
    """The table's help, plus the suites it has an effect on where that is not all."""
    if not option.applies_to:
        return option.help_with_default
    return f"{option.help_with_default} [{applies_text(option)}]"


def applies_text(option: Option) -> str:
    return "only " + ", ".join(describe_tag(tag) for tag in option.applies_to)


def unused_options(settings: Settings, tags: Collection[str]) -> list[str]:
    """One warning line per option the user set (command line or ini) that has no effect
    on any of the selected suites (`tags`, as `suite_tag` names them); none without suites."""
    if not tags:
        return []
    return [
        option.unused_line(tags)
        for option in OPTIONS
        if option.dest in settings.explicit and not option.applies(tags)
    ]


def register(parser: pytest.Parser) -> None:
    """Every option in its --help group, `agenteval: <group>` (`agenteval-<group>` to pytest),
    the groups in the table's order."""
    for option in OPTIONS:
        group = parser.getgroup(f"{GROUP}-{option.group.replace(' ', '-')}", f"{GROUP}: {option.group}")
        kwargs: dict[str, Any] = {
            "dest": _dest(option),
            "help": help_text(option).replace("%", "%%"),  # argparse formats help with %
            "default": None,
        }
        if option.multiple:
            kwargs.update(action="append")
        elif option.type is bool:
            kwargs.update(action="store_const", const="true")
        else:
            kwargs.update(choices=option.choices)
        group.addoption(option.flag, **kwargs)
        ini_type = "linelist" if option.multiple else "string"
        parser.addini(option.ini, type=ini_type, default=None, help=f"ini form of {option.flag}")


def _ini_value(config: pytest.Config, key: str) -> Any:
    value = config.getini(key)
    return None if value in (None, "", []) else value


def _from_ini(config: pytest.Config, option: Option) -> tuple[Any, str] | None:
    """The option's value in the ini file and where it came from, or None where it has none."""
    value = _ini_value(config, option.ini)
    return None if value is None else (value, f"ini key {option.ini}")


def _lookup(config: pytest.Config, option: Option) -> tuple[Any, str] | None:
    """The value the user gave and where (the command line first, then the ini file), or
    None where they gave none."""
    cli = config.getoption(_dest(option))
    if cli is not None:
        return cli, option.flag
    return _from_ini(config, option)


def build_settings(config: pytest.Config) -> Settings:
    values: dict[str, Any] = {}
    explicit = set()
    for option in OPTIONS:
        given = _lookup(config, option)
        if given is None:
            values[option.dest] = option.default
        else:
            values[option.dest] = option.parse(*given)
            explicit.add(option.dest)
    apply_preset(values["preset"], values, explicit)  # the preset's values where the user gave none
    return Settings(**values, model_path=one_model_path(values["model_paths"]), explicit=frozenset(explicit))
