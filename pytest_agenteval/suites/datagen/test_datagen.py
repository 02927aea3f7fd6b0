"""Generated-data quality: one item per generated problem (id = its problem_id), markers
`datagen` and its topic. Needs --datagen-path FILE.jsonl; judges are --judge-endpoint URL
--judge-model NAME (repeatable: a panel), else the run's own model (embedded by default)."""

from pytest_agenteval.tasks.datagen.suite import Datagen

agenteval_suite = Datagen()


def test_datagen(evaluation):
    evaluation.check()
