"""`Option`: one option as the table declares it (flag, type, default, help), and what follows
from that declaration: its ini key, the type of its `Settings` attribute, how a value the
user typed is read."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

_TRUE = frozenset({"1", "true", "yes", "on"})


@dataclass(frozen=True)
class Option:
    dest: str  # the `Settings` attribute
    flag: str
    default: Any
    help: str
    type: Callable[[str], Any] = str  # str, int, float or bool (a flag without a value)
    choices: tuple[str, ...] | None = None
    multiple: bool = False  # repeatable on the command line; a list (one per line) in the ini
    topic: str = ""  # the heading it is listed under in docs/options.md

    @property
    def ini(self) -> str:
        """The ini key: the flag's own name (`--val-n` -> `val_n`)."""
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def old_ini(self) -> str | None:
        """The ini key of release 0.1 (`agenteval_` + the attribute), still read for one
        release with a deprecation warning; None where it is the new key already."""
        old = f"agenteval_{self.dest}"
        return None if old == self.ini else old

    @property
    def annotation(self) -> Any:
        """The type of the option's `Settings` attribute."""
        if self.multiple:
            return tuple[str, ...]
        return self.type | None if self.default is None else self.type

    @property
    def help_with_default(self) -> str:
        """The help `pytest --help` shows: with `(default: X)` where there is a default to
        show (not for flags, empty values or None: the help says what happens then)."""
        if self.type is bool or self.multiple or self.default in (None, ""):
            return self.help
        return f"{self.help} (default: {self.default})"

    def parse(self, raw: Any, source: str) -> Any:
        """A value from the command line or the ini file (text; a list where `multiple`) as
        the option's type. `source` names where it came from in a bad value's message."""
        if self.multiple:
            return tuple(raw)
        if not isinstance(raw, str):
            value = raw
        elif self.type is bool:
            value = raw.strip().lower() in _TRUE
        else:
            try:
                value = self.type(raw)
            except ValueError:
                raise pytest.UsageError(f"{source}: {raw!r} is not a valid {self.type.__name__}") from None
        if self.choices and value not in self.choices:
            raise pytest.UsageError(f"{source}: {value!r} is not one of {self.choices}")
        return value


def topic(title: str, *options: Option) -> tuple[Option, ...]:
    """The options of one topic, in the order --help and docs/options.md list them."""
    return tuple(dataclasses.replace(option, topic=title) for option in options)
