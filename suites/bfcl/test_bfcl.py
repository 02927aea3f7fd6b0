"""BFCL: one item per official entry (id = the official id), markers per category and
group (`-m simple`, `-m "parallel or irrelevance"`, `-m live`). An item passes when the
official AST checker accepts the model's calls.

The shipped suite, run from the repository. From any other folder:
`pytest --pyargs pytest_agenteval.suites.bfcl`; a suite of your own: docs/writing-suites.md."""

from pytest_agenteval.suites.bfcl.test_bfcl import agenteval_suite, test_bfcl  # noqa: F401
