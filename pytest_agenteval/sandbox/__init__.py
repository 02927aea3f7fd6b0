"""Contained execution of model-written Python (retool mode).

A preloaded zygote forks one child per call; the child contains itself with
rlimits, a new session, a scratch directory, a minimal environment and, where
the machine allows, a uid drop, Landlock, seccomp and one bubblewrap around
the zygote. See docs/sandbox.md for what each level guarantees.
"""

from pytest_agenteval.sandbox._output import escape_template_tokens
from pytest_agenteval.sandbox._probe import probe_containment
from pytest_agenteval.sandbox._report import shortfall
from pytest_agenteval.sandbox._sandbox import Sandbox
from pytest_agenteval.sandbox._types import ExecutionResult, SandboxConfig

__all__ = [
    "ExecutionResult",
    "Sandbox",
    "SandboxConfig",
    "escape_template_tokens",
    "probe_containment",
    "shortfall",
]
