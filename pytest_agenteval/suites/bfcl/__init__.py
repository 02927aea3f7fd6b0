"""The shipped bfcl suite: `pytest --pyargs pytest_agenteval.suites.bfcl`."""
