"""Generated-data quality: loading with LaTeX repair, LLM judges (pointwise and both-order
pairwise), panel agreement, judge-free checks and human verification."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_agenteval.tasks.datagen._checks import answer_format, jaccard, nearest_reference, shingles
from pytest_agenteval.tasks.datagen._judge import JudgeSpec, derive_nonce, judge_specs
from pytest_agenteval.tasks.datagen._latex import corrupted_characters, loads_repaired, repair_json_text
from pytest_agenteval.tasks.datagen._panel import krippendorff_alpha, panel_summary, reliability_units
from pytest_agenteval.tasks.datagen._report import PRESETS, decide, gate_presets
from pytest_agenteval.tasks.datagen._stats import pointwise_summary, wilson
from pytest_agenteval.tasks.datagen._verdict import DIMENSIONS, parse_reply
from pytest_agenteval.tasks.datagen._winrate import pair_result, winrate_summary
from pytest_agenteval.tasks.datagen.data import (
    GeneratedProblem,
    LoadReport,
    ReferenceProblem,
    load_generated,
    topic_marker,
)
from pytest_agenteval.tasks.datagen.human import (
    apply_verification,
    human_summary,
    load_verifications,
    verifications_path,
)


def check_judge_options(settings: Any) -> None:
    """Start-up: judge options pair up and every judge endpoint answers (one line each)."""
    from pytest_agenteval.models import probe_endpoint
    from pytest_agenteval.models.keys import api_key_from_env

    try:
        specs = judge_specs(settings.judge_endpoints, settings.judge_models)
        for spec in specs:
            for url in spec.endpoints:
                served = probe_endpoint(url, api_key_from_env(settings.api_key_env))
                if served and spec.model not in served:
                    raise ValueError(
                        f"--judge-model {spec.model!r} is not served by --judge-endpoint {url} "
                        f"(it serves: {', '.join(served)}); fix --judge-model"
                    )
    except ValueError as exc:
        raise pytest.UsageError(str(exc).replace("--endpoint", "--judge-endpoint")) from None


__all__ = [
    "DIMENSIONS",
    "PRESETS",
    "GeneratedProblem",
    "JudgeSpec",
    "LoadReport",
    "ReferenceProblem",
    "answer_format",
    "apply_verification",
    "check_judge_options",
    "corrupted_characters",
    "decide",
    "derive_nonce",
    "gate_presets",
    "human_summary",
    "jaccard",
    "judge_specs",
    "krippendorff_alpha",
    "load_generated",
    "load_verifications",
    "loads_repaired",
    "nearest_reference",
    "pair_result",
    "panel_summary",
    "parse_reply",
    "pointwise_summary",
    "reliability_units",
    "repair_json_text",
    "shingles",
    "topic_marker",
    "verifications_path",
    "wilson",
    "winrate_summary",
]
