"""The shipped aime25 suite: `pytest --pyargs pytest_agenteval.suites.aime25`."""
