"""`pytest-agenteval report`: compare results files (checkpoints, a baseline) as Markdown,
one self-contained HTML file and PNG charts; the report a sweep of models writes at its end."""

from pytest_agenteval.report._command import main
from pytest_agenteval.report._sweep import write_sweep_report
from pytest_agenteval.report.analysis import SuiteReport, build
from pytest_agenteval.report.runs import ReportError, Run, check_comparable, load_run

__all__ = [
    "ReportError",
    "Run",
    "SuiteReport",
    "build",
    "check_comparable",
    "load_run",
    "main",
    "write_sweep_report",
]
