"""The stand-ins' command lines: argparse parsers built from the flag lists of a pinned vLLM
and SGLang (`flags/*.txt`, each naming its version and source file), so a flag either
server would refuse is refused here too, with argparse's own message and exit code 2."""

from __future__ import annotations

import argparse
import functools
from dataclasses import dataclass
from pathlib import Path

FLAGS = Path(__file__).parent / "flags"
VLLM_VERSION = "0.34.0"
SGLANG_VERSION = "0.5.23"
# the subcommands of `vllm` 0.34.0 (vllm/entrypoints/cli/main.py); only `serve` runs here
VLLM_COMMANDS = (
    "chat",
    "complete",
    "serve",
    "launch",
    "bench",
    "collect-env",
    "download-kernels",
    "preload",
    "run-batch",
    "snapshot",
)


@dataclass(frozen=True)
class Flag:
    """One option of a flag list: the strings that select it, how many values it takes."""

    strings: tuple[str, ...]
    nargs: str  # "0" (a switch), "1", "?", "+", "*" or "append"
    required: bool = False
    choices: tuple[str, ...] = ()

    @property
    def dest(self) -> str:
        return self.strings[0].lstrip("-").replace("-", "_")


def read_flags(path: Path) -> tuple[list[str], list[Flag]]:
    """(header lines, flags) of a flag list file."""
    header, flags = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            header.append(line[1:].strip())
            continue
        if not line.strip():
            continue
        strings, nargs, *rest = line.split(" ", 2)
        extra = rest[0] if rest else ""
        required = "required" in extra.split(" choices=")[0].split()
        choices = tuple(extra.split("choices=", 1)[1].split("|")) if "choices=" in extra else ()
        flags.append(Flag(tuple(strings.split(",")), nargs, required, choices))
    return header, flags


class _Switch(argparse.Action):
    """A switch and its negations (`--no-x`; `--disable-x` of `--enable-x`), as vLLM's
    EnableDisableAction and argparse's BooleanOptionalAction read them."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=None)
        first = option_strings[0]
        inverse = {"--enable-": "--disable-", "--disable-": "--enable-"}
        self.negations = {
            o
            for o in option_strings[1:]
            if o.startswith("--no-")
            or any(first.startswith(a) and o.startswith(b) for a, b in inverse.items())
        }

    def __call__(self, parser: object, namespace: object, values: object, option: str | None = None) -> None:
        setattr(namespace, self.dest, option not in self.negations)


def _add(parser: argparse.ArgumentParser, flag: Flag) -> None:
    kwargs: dict[str, object] = {"dest": flag.dest}
    if flag.nargs == "0":
        kwargs["action"] = _Switch
    elif flag.nargs == "append":
        kwargs["action"] = "append"
    elif flag.nargs != "1":
        kwargs["nargs"] = flag.nargs
    if flag.required:
        kwargs["required"] = True
    if flag.choices and flag.nargs != "0":
        kwargs["choices"] = flag.choices
    parser.add_argument(*flag.strings, **kwargs)  # type: ignore[arg-type]


@functools.cache
def flag_list(name: str) -> tuple[tuple[str, ...], tuple[Flag, ...]]:
    """The header and flags of `flags/<name>.txt` (e.g. "vllm-0.34.0")."""
    header, flags = read_flags(FLAGS / f"{name}.txt")
    return tuple(header), tuple(flags)


def vllm_parser() -> argparse.ArgumentParser:
    """`vllm`, with `serve` and its options as vLLM 0.34.0 has them."""
    top = argparse.ArgumentParser(prog="vllm")
    top.add_argument("-v", "--version", action="version", version=VLLM_VERSION)
    commands = top.add_subparsers(dest="subparser", metavar="{" + ",".join(VLLM_COMMANDS) + "}")
    serve = commands.add_parser("serve", usage="vllm serve [model_tag] [options]")
    serve.add_argument("model_tag", nargs="?")
    for flag in flag_list(f"vllm-{VLLM_VERSION}")[1]:
        _add(serve, flag)
    for name in VLLM_COMMANDS:
        if name != "serve":
            commands.add_parser(name, add_help=False).add_argument("rest", nargs=argparse.REMAINDER)
    return top


def vllm_argv(argv: list[str]) -> list[str]:
    """vLLM's FlexibleArgumentParser takes `--max_model_len` for `--max-model-len`."""
    out = []
    for arg in argv:
        if arg.startswith("--") and "_" in arg.split("=", 1)[0]:
            name, eq, value = arg.partition("=")
            arg = name.replace("_", "-") + eq + value
        out.append(arg)
    return out


def parse_vllm(argv: list[str]) -> argparse.Namespace:
    """Parse `vllm ARGS`; argparse exits 2 on a flag vLLM 0.34.0 would refuse."""
    return vllm_parser().parse_args(vllm_argv(argv))


def sglang_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sglang serve")
    for flag in flag_list(f"sglang-{SGLANG_VERSION}")[1]:
        _add(parser, flag)
    return parser


def parse_sglang(argv: list[str]) -> argparse.Namespace:
    """Parse `python -m sglang.launch_server ARGS` as SGLang 0.5.23 does (prog "sglang serve")."""
    return sglang_parser().parse_args(argv)
