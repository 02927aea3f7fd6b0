"""AIME 2025: the suite, the ReTool lab's ReTool protocol and its scorers."""

from pytest_agenteval.tasks.aime25._protocol import (
    CODE_TOOL,
    SYSTEM_PROMPT,
    ParsedAssistant,
    parse_assistant,
    tool_content,
)
from pytest_agenteval.tasks.aime25._retool import PromptTooLong, retool_rollout
from pytest_agenteval.tasks.aime25.suite import Aime25, text_only_messages

__all__ = [
    "CODE_TOOL",
    "SYSTEM_PROMPT",
    "Aime25",
    "ParsedAssistant",
    "PromptTooLong",
    "parse_assistant",
    "retool_rollout",
    "text_only_messages",
    "tool_content",
]
