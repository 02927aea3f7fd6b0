"""Statistics over problem records: Average@N, Pass@k, bootstrap intervals, paired comparisons."""

from pytest_agenteval.stats.metrics import summarize_math, summarize_suite

__all__ = ["summarize_math", "summarize_suite"]
