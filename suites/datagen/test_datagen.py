"""Generated-data quality: one item per generated problem (id = its problem_id), markers
`datagen` and its topic. Needs --datagen-path FILE.jsonl; judges are --judge-endpoint URL
--judge-model NAME (repeatable: a panel), else the run's own model (embedded by default).

The shipped suite, run from the repository. From any other folder:
`pytest --pyargs pytest_agenteval.suites.datagen`; a suite of your own: docs/writing-suites.md."""

from pytest_agenteval.suites.datagen.test_datagen import agenteval_suite, test_datagen  # noqa: F401
