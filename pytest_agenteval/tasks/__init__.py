"""The benchmarks: AIME 2025, BFCL, GAIA and generated-data quality, and the registry of suites
the controller can summarise by name. Import a suite from its own package
(`from pytest_agenteval.tasks.aime25 import Aime25`): this one stays empty so that importing one
benchmark does not import the others."""
