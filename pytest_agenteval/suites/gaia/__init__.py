"""The shipped gaia suite: `pytest --pyargs pytest_agenteval.suites.gaia`."""
