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


# subcommand -> function(argv) -> exit status
SUBCOMMANDS: dict[str, Callable[[list[str]], int]] = {
    "report": _report,
    "review": _review,
}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in SUBCOMMANDS:
        names = ", ".join(sorted(SUBCOMMANDS))
        print(f"usage: pytest-agenteval {{{names}}} ...", file=sys.stderr)
        return 2
    return SUBCOMMANDS[args[0]](args[1:])
