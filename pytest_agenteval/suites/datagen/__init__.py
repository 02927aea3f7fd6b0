"""The shipped datagen suite: `pytest --pyargs pytest_agenteval.suites.datagen`."""
