"""`pytest-agenteval SUBCOMMAND ...`: tools beside the pytest plugin."""

from __future__ import annotations

import sys
from collections.abc import Callable


def _report(argv: list[str]) -> int:
    from pytest_agenteval.report import main

    return main(argv)


def _review(argv: list[str]) -> int:
    from pytest_agenteval.report.review import main

    return main(argv)


def _merge(argv: list[str]) -> int:
    from pytest_agenteval.output.merge import main

    return main(argv)


def _cache(argv: list[str]) -> int:
    from pytest_agenteval.models.cache_folder import main

    return main(argv)


def _list(argv: list[str]) -> int:
    from pytest_agenteval.tasks.catalog import main

    return main(argv)


# subcommand -> (function(argv) -> exit status, what it does)
SUBCOMMANDS: dict[str, tuple[Callable[[list[str]], int], str]] = {
    "report": (_report, "compare results files: a Markdown/HTML report with paired differences"),
    "merge": (_merge, "join the results files of a sharded run (--agenteval-shard I/N), then gate"),
    "review": (_review, "a self-contained HTML page to review and rate generations"),
    "cache": (_cache, "the generation cache: info, prune --older-than 30d, clear"),
    "list": (_list, "the shipped suites, presets and backends (--json: as data); offline"),
}

HELP = """usage: pytest-agenteval {names} ...

Tools beside the pytest plugin (runs themselves are `pytest --pyargs pytest_agenteval.suites.NAME`).

subcommands:
{rows}

`pytest-agenteval SUBCOMMAND --help` gives a subcommand's own options; `pytest --help`
lists the plugin's (under "agenteval")."""


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    names = ", ".join(sorted(SUBCOMMANDS))
    if args and args[0] in ("-h", "--help", "help"):
        rows = "\n".join(f"  {name:<8} {about}" for name, (_, about) in sorted(SUBCOMMANDS.items()))
        print(HELP.format(names="{" + names + "}", rows=rows))
        return 0
    if not args or args[0] not in SUBCOMMANDS:
        problem = f"unknown subcommand {args[0]!r}; " if args else ""
        print(f"usage: pytest-agenteval {{{names}}} ...", file=sys.stderr)
        print(f"pytest-agenteval: {problem}see pytest-agenteval --help", file=sys.stderr)
        return 2
    return SUBCOMMANDS[args[0]][0](args[1:])
