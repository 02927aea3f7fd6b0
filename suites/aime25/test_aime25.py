"""AIME 2025: one item per problem, N generations each; an item passes when at least
one generation is correct. Options: `pytest --help`, group agenteval.

The shipped suite, run from the repository. From any other folder:
`pytest --pyargs pytest_agenteval.suites.aime25`; a suite of your own: docs/writing-suites.md."""

from pytest_agenteval.suites.aime25.test_aime25 import agenteval_suite, test_aime25  # noqa: F401
