"""pytest-agenteval: benchmarks as test suites.

Pipeline: datasets -> tasks (a suite's problems) -> solvers driving models -> scorers -> records
-> stats -> output (results file, gates); plugin/ binds it to pytest. docs/design.md maps each package.
"""

from pytest_agenteval.api.records import GenerationRecord, Problem, ProblemRecord, Rollout, Score, sample_seed
from pytest_agenteval.api.suite import DataError, RolloutContext, Suite

__all__ = [
    "DataError",
    "GenerationRecord",
    "Problem",
    "ProblemRecord",
    "Rollout",
    "RolloutContext",
    "Score",
    "Suite",
    "sample_seed",
]
__version__ = "0.1.0"
