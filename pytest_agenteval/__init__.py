"""pytest-agenteval: benchmarks as test suites.

Pipeline: problems -> samplers -> rollout -> scorers -> records -> metrics -> results/gate.
"""

from .records import GenerationRecord, Problem, ProblemRecord, Rollout, Score, sample_seed
from .suite import DataError, RolloutContext, Suite

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
