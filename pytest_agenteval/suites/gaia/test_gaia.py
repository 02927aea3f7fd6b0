"""GAIA: one item per task (id = task_id), markers level1/level2/level3. The data is
gated: set HF_TOKEN after accepting its terms, or pass --gaia-path DIR. Plug in your own
agent by overriding the `agenteval_agent` fixture in conftest.py (see the README)."""

from pytest_agenteval.tasks.gaia.suite import Gaia

agenteval_suite = Gaia()


def test_gaia(evaluation):
    evaluation.check()
