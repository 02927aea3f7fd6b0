"""`python -m pytest_agenteval SUBCOMMAND ...`, the same as the `pytest-agenteval` script."""

import sys

from pytest_agenteval.cli import main

sys.exit(main())
