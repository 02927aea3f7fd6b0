"""`pytest-agenteval SUBCOMMAND ...`: the package's command line. Each subcommand is a
module with `main(argv) -> exit status`, imported only when it runs."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

COMMANDS: dict[str, str] = {
    "report": "pytest_agenteval.reporting",
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help") or args[0] not in COMMANDS:
        known = ", ".join(sorted(COMMANDS))
        if args and args[0] not in ("-h", "--help"):
            print(f"pytest-agenteval: unknown command {args[0]!r}; use one of: {known}", file=sys.stderr)
            return 2
        print(f"usage: pytest-agenteval {{{known}}} ...  (pytest-agenteval COMMAND --help for its options)")
        return 0
    return int(importlib.import_module(COMMANDS[args[0]]).main(args[1:]) or 0)
