"""AIME 2025: one item per problem, N generations each; an item passes when at least
one generation is correct. Options: `pytest --help`, group agenteval."""

from pytest_agenteval.tasks.aime25 import Aime25

agenteval_suite = Aime25()


def test_aime25(evaluation):
    evaluation.check()
