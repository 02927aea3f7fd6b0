"""The command line pytest-xdist hands to workers started elsewhere (`--tx ssh=...`,
`--tx socket=...`, `--tx popen//chdir=DIR`).

xdist sends such a worker the controller's own arguments, after mapping every token that
names an existing file or folder into the worker's rsync copy (`make_reltoroot`). It
cannot tell a test path from an option's value, and it maps only absolute paths: typed
as the docs write it (`suites/aime25 --rsyncdir suites/aime25 --rsyncignore
agenteval-results --dataset-path /shared/aime25.jsonl`) the run ended in an INTERNALERROR
(`arg suites/aime25 not relative to an rsync root`). So before xdist starts its workers,
the controller rewrites its arguments into the equivalent form xdist maps right: each
option joined to its value (`--dataset-path=/shared/aime25.jsonl`, `-kEXPR`; the start-up
checks create folders such as agenteval-results/ after this runs, so every value, on disk
or not), and a test path made absolute. A test path outside every `--rsyncdir`, which
such a worker could not have, is a usage error at start-up that names the fix."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

# How many values an option takes from the tokens after it: argparse's nargs
# (None: exactly one; 0: a flag; "?", "*", "+" or a count).
Arity = int | str | None


class RemoteArgsError(ValueError):
    """An argument that xdist would take for a test path a remote worker cannot have."""


def option_arities(config: pytest.Config) -> dict[str, Arity]:
    """Every option string of this run's parser and how many values it takes. pytest's
    parser keeps its argparse parser as `optparser` (8.x and 9.x); argparse keeps the
    option strings in `_option_string_actions`."""
    actions = config._parser.optparser._option_string_actions  # noqa: SLF001
    return {name: action.nargs for name, action in actions.items()}


def _exists(value: str, cwd: Path) -> bool:
    """What xdist's make_reltoroot asks of a token: does its path part exist?"""
    try:
        return (cwd / value.split("::")[0]).exists()
    except (OSError, ValueError):
        return False


def _test_path(arg: str, cwd: Path, roots: Sequence[Path], spec: str) -> str:
    """An existing test path, absolute (symlinked folders resolved as xdist resolves
    the rsync roots), or an error when no root holds it."""
    parts = arg.split("::")
    absolute = Path(os.path.abspath(cwd / parts[0]))
    path = absolute.parent.resolve() / absolute.name if absolute.name else absolute
    if not any(path == root or root in path.parents for root in roots):
        raise RemoteArgsError(
            f"the test path {parts[0]} is outside every --rsyncdir, so the worker --tx {spec} "
            f"(started in another folder) would not have it: add --rsyncdir {parts[0]} "
            "(or a folder above it)"
        )
    return "::".join([str(path), *parts[1:]])


def _short_option(arg: str, arities: Mapping[str, Arity]) -> tuple[str, Arity]:
    """A single-dash token as argparse reads it: flags cluster (`-vx`); the first option
    that takes a value takes the rest of the token, or (none left) the next token.
    Returns the option that may take the next token and its arity (0: none)."""
    for i in range(1, len(arg)):
        option = "-" + arg[i]
        arity = arities.get(option, 0)
        if arity != 0:
            return option, (arity if i == len(arg) - 1 else 0)
    return arg, 0


def worker_args(
    args: Sequence[str], arities: Mapping[str, Arity], cwd: Path, roots: Sequence[Path], spec: str
) -> list[str]:
    """`args` (the controller's command line, relative to `cwd`) in the form xdist maps
    right into the `roots` a worker elsewhere receives: the same run, parsed the same."""
    out: list[str] = []
    rest = list(args)
    positional_only = False
    while rest:
        arg = rest.pop(0)
        if positional_only or arg == "-" or not arg.startswith("-"):
            out.append(_test_path(arg, cwd, roots, spec) if _exists(arg, cwd) else arg)
            continue
        if arg == "--":
            positional_only = True
            out.append(arg)
            continue
        if arg.startswith("--"):
            arity = 0 if "=" in arg else arities.get(arg, 0)
        else:
            arity = 0 if arg in arities and arities[arg] == 0 else _short_option(arg, arities)[1]
        if arity == 0 or not rest:
            out.append(arg)
            continue
        if arity in (None, 1) or (arity == "?" and not rest[0].startswith("-")):
            value = rest.pop(0)  # one value: joined, whether or not it is on disk yet
            if arg.startswith("--"):
                out.append(f"{arg}={value}")
            else:
                out += [arg + value] if value else [arg, value]
            continue
        taken: list[str] = []
        while rest and not rest[0].startswith("-") and (not isinstance(arity, int) or len(taken) < arity):
            taken.append(rest.pop(0))
        on_disk = [v for v in taken if _exists(v, cwd)]
        if on_disk:
            raise RemoteArgsError(
                f"{arg} takes several values, and pytest-xdist would send {on_disk[0]} (a file here) "
                f"to the worker --tx {spec} as a test path: pass {arg} in an ini file's addopts instead"
            )
        out += [arg, *taken]
    return out


def remote_spec(config: pytest.Config) -> str | None:
    """The first worker xdist will start in another folder (its --tx spec), if any."""
    if not config.pluginmanager.hasplugin("xdist") or config.getoption("collectonly", False):
        return None
    if config.getoption("dist", "no") == "no" or not config.getoption("tx", None):
        return None
    import execnet
    from xdist.workermanage import parse_tx_spec_config

    for text in parse_tx_spec_config(config):
        spec = execnet.XSpec(text)
        if not spec.popen or spec.chdir:
            return text
    return None


def rsync_roots(config: pytest.Config) -> list[Path]:
    """The folders xdist sends to every worker elsewhere, resolved as xdist resolves them."""
    roots = [*(config.getoption("rsyncdir", None) or ()), *config.getini("rsyncdirs")]
    return [Path(root).resolve() for root in roots]


def pytest_configure(config: pytest.Config) -> None:
    """On the controller, before xdist starts a worker: the arguments it will send."""
    if hasattr(config, "workerinput") or config.option.help:
        return
    spec = remote_spec(config)
    if spec is None:
        return
    params = config.invocation_params
    try:
        args = worker_args(
            [str(a) for a in params.args], option_arities(config), Path(params.dir), rsync_roots(config), spec
        )
    except RemoteArgsError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.invocation_params = dataclasses.replace(params, args=tuple(args))
