"""`Settings`: the effective value of every option, a frozen dataclass generated from the
table (one attribute per option, its default the table's), identical on the controller and
every xdist worker."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pytest_agenteval.config.redact import without_credentials
from pytest_agenteval.config.table import OPTIONS


def _as_dict(self: Settings) -> dict[str, Any]:
    """The configuration as recorded: a URL's user and password never in it (`Option.redact`)."""
    data = dataclasses.asdict(self)
    data.pop("explicit")
    for option in OPTIONS:
        value = data[option.dest]
        if option.redact and value:
            shown = [without_credentials(str(v)) for v in value] if option.multiple else None
            data[option.dest] = tuple(shown) if shown is not None else without_credentials(str(value))
    return data


def _effective_scorer(self: Settings) -> str:
    if self.scorer != "auto":
        return self.scorer
    return "math-verify-tail" if self.mode == "retool" else "boxed-integer"


def _concurrency_ceiling(self: Settings) -> int:
    """Requests in flight per endpoint at most: --concurrency, or with auto --concurrency-max."""
    return self.concurrency_max if self.concurrency == "auto" else self.concurrency


def _generate() -> type:
    fields: list[Any] = [(o.dest, o.annotation, dataclasses.field(default=o.default)) for o in OPTIONS]
    # the one --model-path of a one-model run (None: the embedded model, or a sweep, whose
    # models `plugin/sweep.py` expands from model_paths); build_settings sets it
    fields.append(("model_path", str | None, dataclasses.field(default=None)))
    # the options the user set (command line or ini file): suites default the others
    fields.append(("explicit", frozenset[str], dataclasses.field(default=frozenset())))
    namespace = {
        "__module__": __name__,  # pickle finds the class here
        "__qualname__": "Settings",
        "__doc__": "The effective configuration, identical on the controller and every worker.",
        "as_dict": _as_dict,
        "effective_scorer": property(_effective_scorer),
        "concurrency_ceiling": property(_concurrency_ceiling),
    }
    return dataclasses.make_dataclass("Settings", fields, namespace=namespace, frozen=True)


if TYPE_CHECKING:
    # What type checkers and editors see: the attributes the runtime class is generated with,
    # by name and type, one line each. tests/core/test_options.py fails when the two differ.
    @dataclasses.dataclass(frozen=True)
    class Settings:
        """The effective configuration, identical on the controller and every worker."""

        # Model
        model_paths: tuple[str, ...]
        base_model: str | None
        chat_template: str | None
        strict: bool
        thinking: str
        llama_threads: int
        n_ctx: int
        sdk_telemetry: bool
        # Reasoning
        think_tags: str
        # Launched servers (--serve)
        serve: bool
        serve_backend: str
        serve_timeout: float
        serve_keep: bool
        serve_gpus: str | None
        serve_tp: int
        serve_max_servers: int
        serve_args: tuple[str, ...]
        # Endpoints (OpenAI-compatible servers)
        endpoints: tuple[str, ...]
        model_name: str | None
        api_key_env: str
        concurrency: int | str
        concurrency_max: int
        samples_per_request: int
        request_timeout: float
        idle_timeout: float
        no_stream: bool
        max_attempts: int
        retry_max_seconds: float
        continuation: str
        tokenizer: str | None
        # Sampling
        val_n: int
        temperature: float
        top_p: float
        top_k: int
        max_tokens: int
        seed: int
        # Presets
        preset: str | None
        presence_penalty: float
        # Problem selection
        limit: int
        limit_per_category: int
        # AIME 2025
        mode: str
        scorer: str
        dataset_path: str | None
        dataset_id: str
        dataset_revision: str | None
        # Retool budgets
        max_code_calls: int
        max_assistant_turns: int
        max_trajectory_tokens: int
        max_assistant_tokens: int
        max_tool_response_tokens: int
        # Sandbox
        sandbox_timeout: float
        sandbox_workers: int
        sandbox_level: str
        # Results, gates and baselines
        out: str | None
        gates: tuple[str, ...]
        gate_confidence: float | None
        sequential: bool
        compare: str | None
        compare_tolerance: float
        allow_version_change: bool
        length_warn_share: float
        progress: str
        log_targets: tuple[str, ...]
        log_always: bool
        # Cache
        cache_dir: str | None
        no_cache: bool
        model_revision: str | None
        # BFCL
        bfcl_data_dir: str | None
        bfcl_style: str
        bfcl_weights: str | None
        bfcl_export_dir: str | None
        bfcl_export_model: str | None
        bfcl_progressive: float | None
        bfcl_search_backend: str | None
        # GAIA
        gaia_path: str | None
        gaia_split: str
        gaia_unordered_lists: bool
        gaia_max_steps: int
        gaia_submission: str | None
        tool_protocol: str
        # Generated data (datagen)
        datagen_path: str | None
        reference_path: str | None
        judge_endpoints: tuple[str, ...]
        judge_models: tuple[str, ...]
        datagen_opponents: int
        datagen_reasks: int
        datagen_solve: int
        datagen_verifications: str | None
        # Shards (clusters)
        shard: str | None
        shard_count: int
        # Cost and budgets
        prices: str | None
        max_cost: float | None
        max_total_tokens: int | None
        budget_ledger: str | None
        budget_per_shard: bool
        estimate: bool
        estimate_sample: int
        # Batch API
        batch: bool
        batch_poll_interval: float

        model_path: str | None = None
        explicit: frozenset[str] = frozenset()

        def as_dict(self) -> dict[str, Any]: ...

        @property
        def effective_scorer(self) -> str: ...

        @property
        def concurrency_ceiling(self) -> int: ...

else:
    Settings = _generate()


def one_model_path(paths: Sequence[str]) -> str | None:
    """`Settings.model_path`: a one-model run's --model-path as before; None for none or a
    sweep's several (plugin/sweep.py expands those)."""
    return paths[0] if len(paths) == 1 else None
