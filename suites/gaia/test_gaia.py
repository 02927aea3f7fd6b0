"""GAIA: one item per task (id = task_id), markers level1/level2/level3. The data is
gated: set HF_TOKEN after accepting its terms, or pass --gaia-path DIR. Plug in your own
agent by overriding the `agenteval_agent` fixture in conftest.py (see the README).

The shipped suite, run from the repository. From any other folder:
`pytest --pyargs pytest_agenteval.suites.gaia`; a suite of your own: docs/writing-suites.md."""

from pytest_agenteval.suites.gaia.test_gaia import agenteval_suite, test_gaia  # noqa: F401
