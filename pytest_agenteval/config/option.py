"""`Option`: one option as the table declares it (flag, type, default, help), and what follows
from that declaration: its ini key, the type of its `Settings` attribute, how a value the
user typed is read."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
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
    # str, int, float or bool (a flag without a value); or a parser whose `annotation` is the
    # Settings attribute's type and whose ValueError says what it takes
    type: Callable[[str], Any] = str
    choices: tuple[str, ...] | None = None
    multiple: bool = False  # repeatable on the command line; a list (one per line) in the ini
    # The `pytest --help` group it is listed in (`agenteval: <group>`), one `##` heading of
    # docs/options.md; and its topic there, a `###` heading (none where it is the group's title)
    group: str = ""
    topic: str = ""
    # The suites (and modes) it has an effect on, as `suite_tag` names them: empty for every
    # suite. Set by the user while none of them is selected, it is a start-up warning.
    applies_to: tuple[str, ...] = ()
    instead: str = ""  # the flag that does its job in the suites it does not apply to
    # Run-local: where and how this run does its work (paths, endpoints, concurrency, timeouts,
    # gates), not what it produces. The shards of one evaluation may differ in it; their
    # `config_hash` (`pytest-agenteval merge`) leaves it out.
    local: bool = False
    # Its values may hold a URL with a user and password (`--agenteval-log`): recorded
    # (`Settings.as_dict`, the results file's `config`) without them (config/redact.py).
    redact: bool = False

    @property
    def ini(self) -> str:
        """The ini key: the flag's own name (`--val-n` -> `val_n`)."""
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def annotation(self) -> Any:
        """The type of the option's `Settings` attribute."""
        if self.multiple:
            return tuple[str, ...]
        kind = getattr(self.type, "annotation", self.type)
        return kind | None if self.default is None else kind

    @property
    def help_with_default(self) -> str:
        """The help `pytest --help` shows: with `(default: X)` where there is a default to
        show (not for flags, empty values or None: the help says what happens then)."""
        if self.type is bool or self.multiple or self.default in (None, ""):
            return self.help
        return f"{self.help} (default: {self.default})"

    def applies(self, tags: Iterable[str]) -> bool:
        """Has it an effect on a run of the suites `tags` (`suite_tag`)? Unknown suites
        (a suite of the user's own) may read any option: they count as applying."""
        if not self.applies_to:
            return True
        return any(tag in self.applies_to or tag.partition(":")[0] not in KNOWN_SUITES for tag in tags)

    def unused_line(self, tags: Iterable[str]) -> str:
        """The start-up warning of an option set for suites it has no effect on."""
        shown = ", ".join(describe_tag(tag) for tag in sorted(set(tags)))
        if self.instead:
            verb = "uses" if len(set(tags)) == 1 else "use"
            why = f"{shown} {verb} {self.instead}"
        else:
            why = shown
        where = ", ".join(describe_tag(tag) for tag in self.applies_to)
        return f"{self.flag} has no effect on the selected suites ({why}); it applies to {where}"

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
            except ValueError as exc:
                what = f"a valid {self.type.__name__}" if isinstance(self.type, type) else str(exc)
                raise pytest.UsageError(f"{source}: {raw!r} is not {what}") from None
        if self.choices and value not in self.choices:
            raise pytest.UsageError(f"{source}: {value!r} is not one of {self.choices}")
        return value


# The suites the table's `applies_to` names, each tag a suite or `suite:mode`.
KNOWN_SUITES = ("aime25", "bfcl", "gaia", "datagen")


def suite_tag(kind: str | None, name: str, mode: str) -> str:
    """How `applies_to` names a selected suite: `aime25:retool`, `aime25:text-only` (its
    two modes read different budgets), `bfcl`, `gaia`, `datagen`; a suite of the user's own
    by its name. `kind` is the built-in suite it derives from, if any."""
    if kind == "aime25":
        return f"aime25:{mode}"
    return kind or name


def describe_tag(tag: str) -> str:
    suite, _, mode = tag.partition(":")
    return f"{suite} in {mode} mode" if mode else suite


def topic(title: str, *options: Option, applies_to: tuple[str, ...] = ()) -> tuple[Option, ...]:
    """The options of one topic, in the order --help and docs/options.md list them;
    `applies_to`: the suites of every option of the topic that names none of its own."""
    return tuple(
        dataclasses.replace(option, topic=title, applies_to=option.applies_to or applies_to)
        for option in options
    )


def group(title: str, *options: Option) -> tuple[Option, ...]:
    """The options of one `pytest --help` group (`agenteval: <title>`), its topics in the
    order --help and docs/options.md list them."""
    return tuple(dataclasses.replace(option, group=title) for option in options)
