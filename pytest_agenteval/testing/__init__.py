"""Test utilities: a real-socket OpenAI-compatible mock server (see docs/testing-server.md),
and pytest fixtures over it (`fixtures.py`).

``openai_server`` (the CLI module) is deliberately not imported here, so that
``python -m pytest_agenteval.testing.openai_server`` does not import itself twice.

The names below load when first used: the fixtures are registered in every pytest run, and
importing the server (aiohttp's web framework) there would slow every start-up.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOME = {
    "AnswerMapResponder": "pytest_agenteval.testing._responders",
    "AsyncOpenAITestServer": "pytest_agenteval.testing._server",
    "BatchConfig": "pytest_agenteval.testing._batch",
    "BernoulliResponder": "pytest_agenteval.testing._bernoulli",
    "DEFAULT_ANSWER": "pytest_agenteval.testing._responders",
    "FAULT_KINDS": "pytest_agenteval.testing._faults",
    "FaultContext": "pytest_agenteval.testing._faults",
    "FaultInjector": "pytest_agenteval.testing._faults",
    "OpenAITestServer": "pytest_agenteval.testing._server",
    "Reply": "pytest_agenteval.testing._responders",
    "Responder": "pytest_agenteval.testing._responders",
    "ScriptedToolModel": "pytest_agenteval.testing._responders",
    "ServerConfig": "pytest_agenteval.testing._config",
    "TemplateResponder": "pytest_agenteval.testing._responders",
    "ToolCall": "pytest_agenteval.testing._responders",
    "attempts_by_key": "pytest_agenteval.testing._stats",
    "estimate_tokens": "pytest_agenteval.testing._responders",
    "faults_before_success": "pytest_agenteval.testing._stats",
    "format_text_tool_call": "pytest_agenteval.testing._responders",
    "get_stats": "pytest_agenteval.testing._process",
    "last_user_text": "pytest_agenteval.testing._responders",
    "observation": "pytest_agenteval.testing._responders",
    "outcome_counts": "pytest_agenteval.testing._stats",
    "parse_fault_mix": "pytest_agenteval.testing._faults",
    "request_key": "pytest_agenteval.testing._app",
    "reset_stats": "pytest_agenteval.testing._process",
    "start_server_process": "pytest_agenteval.testing._process",
    "stop_server_process": "pytest_agenteval.testing._process",
    "turn_index": "pytest_agenteval.testing._responders",
    "think_reply": "pytest_agenteval.testing._think",
    "parse_reasoning": "pytest_agenteval.testing._think",
}

__all__ = [
    "DEFAULT_ANSWER",
    "FAULT_KINDS",
    "AnswerMapResponder",
    "AsyncOpenAITestServer",
    "BatchConfig",
    "BernoulliResponder",
    "FaultContext",
    "FaultInjector",
    "OpenAITestServer",
    "Reply",
    "Responder",
    "ScriptedToolModel",
    "ServerConfig",
    "TemplateResponder",
    "ToolCall",
    "attempts_by_key",
    "estimate_tokens",
    "faults_before_success",
    "format_text_tool_call",
    "get_stats",
    "last_user_text",
    "observation",
    "outcome_counts",
    "parse_fault_mix",
    "request_key",
    "reset_stats",
    "start_server_process",
    "stop_server_process",
    "parse_reasoning",
    "think_reply",
    "turn_index",
]


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value
    return value
