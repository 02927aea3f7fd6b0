"""The model choice of a run whose server was launched: the same on the controller and on
every xdist worker, which receive it through workerinput."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_agenteval.models import ModelChoice

WORKERINPUT_KEY = "agenteval_serve"


def served_choice(data: Mapping[str, Any]) -> ModelChoice:
    """An OpenAI-protocol choice pointing at the launched servers (replicas balanced)."""
    return ModelChoice(
        "openai",
        endpoints=tuple(data["endpoints"]),
        model_name=str(data["model_name"]),
        served=dict(data["served"]),
        api_key=data.get("key"),
    )
