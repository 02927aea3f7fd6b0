"""Experiment trackers (`--agenteval-log`): MLflow, Weights & Biases and SwanLab, one module
each, given a run's summaries and files once at the end (docs/trackers.md)."""

from __future__ import annotations

from pytest_agenteval.output.trackers.markers import read_markers
from pytest_agenteval.output.trackers.plan import ModelResults
from pytest_agenteval.output.trackers.send import log_merged, log_results, log_target
from pytest_agenteval.output.trackers.targets import Target, check_targets

__all__ = [
    "ModelResults",
    "Target",
    "check_targets",
    "log_merged",
    "log_results",
    "log_target",
    "read_markers",
]
