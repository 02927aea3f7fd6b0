"""BFCL: one item per official entry (id = the official id), markers per category and
group (`-m simple`, `-m "parallel or irrelevance"`, `-m live`). An item passes when the
official AST checker accepts the model's calls."""

from pytest_agenteval.tasks.bfcl.suite import Bfcl

agenteval_suite = Bfcl()


def test_bfcl(evaluation):
    evaluation.check()
