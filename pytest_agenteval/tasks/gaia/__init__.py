"""GAIA: data loading, answer extraction, the official scorer, metrics and submission."""

from pytest_agenteval.tasks.gaia._agent import AgentResult
from pytest_agenteval.tasks.gaia._data import (
    GAIA_REPO_ID,
    NO_TOKEN_MESSAGE,
    GaiaDataError,
    GaiaTask,
    GaiaUnavailable,
    download_gaia,
    find_split_dir,
    load_gaia,
    read_split_dir,
    resolve_token,
)
from pytest_agenteval.tasks.gaia._extract import ExtractedAnswer, clean_answer, extract_final_answer
from pytest_agenteval.tasks.gaia._files import AttachmentText, read_attachment
from pytest_agenteval.tasks.gaia._metrics import GaiaItemResult, drop_rate, percentile, summarize_gaia
from pytest_agenteval.tasks.gaia._prompt import GAIA_SYSTEM_PROMPT, build_messages, build_user_message
from pytest_agenteval.tasks.gaia._scorer import (
    ScoreResult,
    normalize_number_str,
    normalize_str,
    question_scorer,
    score_with_reason,
    split_list,
)
from pytest_agenteval.tasks.gaia._submission import write_submission

__all__ = [
    "AgentResult",
    "GAIA_REPO_ID",
    "GAIA_SYSTEM_PROMPT",
    "NO_TOKEN_MESSAGE",
    "AttachmentText",
    "ExtractedAnswer",
    "GaiaDataError",
    "GaiaItemResult",
    "GaiaTask",
    "GaiaUnavailable",
    "ScoreResult",
    "build_messages",
    "build_user_message",
    "clean_answer",
    "download_gaia",
    "drop_rate",
    "extract_final_answer",
    "find_split_dir",
    "load_gaia",
    "normalize_number_str",
    "normalize_str",
    "percentile",
    "question_scorer",
    "read_attachment",
    "read_split_dir",
    "resolve_token",
    "score_with_reason",
    "split_list",
    "summarize_gaia",
    "write_submission",
]
