"""Test utilities: a real-socket OpenAI-compatible mock server (see docs/testing-server.md).

``openai_server`` (the CLI module) is deliberately not imported here, so that
``python -m pytest_agenteval.testing.openai_server`` does not import itself twice.
"""

from pytest_agenteval.testing._app import request_key
from pytest_agenteval.testing._config import ServerConfig
from pytest_agenteval.testing._faults import FAULT_KINDS, FaultContext, FaultInjector, parse_fault_mix
from pytest_agenteval.testing._process import (
    get_stats,
    reset_stats,
    start_server_process,
    stop_server_process,
)
from pytest_agenteval.testing._responders import (
    DEFAULT_ANSWER,
    AnswerMapResponder,
    Reply,
    Responder,
    ScriptedToolModel,
    TemplateResponder,
    ToolCall,
    estimate_tokens,
    format_text_tool_call,
    last_user_text,
    observation,
    turn_index,
)
from pytest_agenteval.testing._server import AsyncOpenAITestServer, OpenAITestServer
from pytest_agenteval.testing._stats import attempts_by_key, faults_before_success, outcome_counts

__all__ = [
    "DEFAULT_ANSWER",
    "FAULT_KINDS",
    "AnswerMapResponder",
    "AsyncOpenAITestServer",
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
    "turn_index",
]
