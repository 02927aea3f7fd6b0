"""Model backends behind one async interface, chosen from the command line.

The face of the package; the code lives by concern:

- `choice.py`: what `--model-path` / `--endpoint` name (`ModelChoice`, `choose_model`), the
  endpoint probes, the model's identity for the summary;
- `factory.py`: `make_sampler`, the sampler a process uses;
- `backends/`: one module per backend (OpenAI-compatible, llama.cpp, transformers and its
  checkpoints, the SDK samplers PyTRIO and Tinker, replay);
- `http/`: the transport of the OpenAI-protocol backend (client, streaming, retries, health,
  slots, AIMD, reading replies and refusals, the start-up probes);
- `tokens/`: chat templates and token counting;
- `cost/`: prices, the run's budget, OpenAI's Batch API;
- `serve/`: servers the run launches (`--serve`), sweeps' server waves included;
- `cache.py` (the generation cache), `sweep.py` (a sweep's models), `identity.py`,
  `reasoning.py` (the reasoning/answer split), `keys.py`, `schemes.py`, `gguf.py`.
"""

from __future__ import annotations

from typing import Any

from pytest_agenteval.api.sampler import (
    Completion,
    ContextOverflowError,
    FatalRequestError,
    Message,
    ModelIdentity,
    Sampler,
    SamplerError,
    SamplingParams,
    ToolCall,
    approx_token_count,
    request_priority,
)
from pytest_agenteval.models.backends.openai import OpenAISampler
from pytest_agenteval.models.backends.replay import PREFIX as REPLAY_PREFIX
from pytest_agenteval.models.backends.replay import ReplayError, ReplaySource
from pytest_agenteval.models.choice import (
    SDK_SCHEMES,
    ModelChoice,
    choose_model,
    describe_model,
    display_name,
    probe_endpoint,
    probe_models,
    probe_token_routes,
)
from pytest_agenteval.models.cost.budget import BudgetExceeded
from pytest_agenteval.models.factory import make_sampler
from pytest_agenteval.models.http.retry import RetryPolicy
from pytest_agenteval.models.http.slots import EndpointSlots, PrioritySlots
from pytest_agenteval.models.identity import identity_warning, model_entry
from pytest_agenteval.models.reasoning import ThinkSplit

__all__ = [
    "REPLAY_PREFIX",
    "SDK_SCHEMES",
    "BudgetExceeded",
    "Completion",
    "ContextOverflowError",
    "EndpointSlots",
    "FatalRequestError",
    "LlamaSampler",
    "Message",
    "ModelChoice",
    "ModelIdentity",
    "OpenAISampler",
    "PrioritySlots",
    "ReplayError",
    "ReplaySource",
    "RetryPolicy",
    "Sampler",
    "SamplerError",
    "SamplingParams",
    "ThinkSplit",
    "ToolCall",
    "approx_token_count",
    "choose_model",
    "describe_model",
    "display_name",
    "embedded_model_path",
    "identity_warning",
    "make_sampler",
    "model_entry",
    "probe_endpoint",
    "probe_models",
    "probe_token_routes",
    "request_priority",
]


def __getattr__(name: str) -> Any:
    """The llama.cpp backend loads when asked for: an endpoint run never needs it."""
    if name in ("LlamaSampler", "embedded_model_path"):
        from pytest_agenteval.models.backends import llama

        return getattr(llama, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
