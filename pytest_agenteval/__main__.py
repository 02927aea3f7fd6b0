"""`python -m pytest_agenteval SUBCOMMAND ...`, the same as the `pytest-agenteval` script."""

import sys

from .cli import main

sys.exit(main())
