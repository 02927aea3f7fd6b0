"""Start-up checks: every option and the model choice checked before the first request, each
failure one line naming the fix (a `pytest.UsageError`), never a traceback."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_agenteval.api.reasoning import parse_think_tags
from pytest_agenteval.api.suite import Suite
from pytest_agenteval.config.option import suite_tag
from pytest_agenteval.config.options import OPTIONS, Settings, unused_options
from pytest_agenteval.models import (
    SDK_SCHEMES,
    ModelChoice,
    ReplayError,
    ReplaySource,
    choose_model,
    model_entry,
    probe_models,
    probe_token_routes,
)
from pytest_agenteval.models.keys import api_key_from_env
from pytest_agenteval.output.gate import (
    Gate,
    GateError,
    check_metric_name,
    check_pass_at_k,
    parse_gate,
    with_confidence,
)
from pytest_agenteval.output.results import RESULTS_DIR, check_writable
from pytest_agenteval.plugin.items import declares_suite, files_of_nodeid, suite_files
from pytest_agenteval.tasks.registry import (
    KNOWN_METRICS,
    SuiteImportError,
    builtin_kind,
    numeric_metrics,
    suite_of_file,
)


def check_endpoint_url(flag: str, url: str) -> None:
    """An endpoint is an http(s) URL with a host and without credentials in it (they
    would be recorded with the results, as every endpoint URL is)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a bad port raises ValueError here)
        (parts.hostname or "").encode("idna")  # what the connection looks up: "a..b" cannot be
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # UnicodeError is one
        valid = False
    if not valid:
        shown = "(not shown: it has credentials)" if "@" in url else url
        raise pytest.UsageError(f"{flag} {shown} is not an http(s) URL; e.g. http://localhost:8000/v1")
    if parts.username is not None:
        raise pytest.UsageError(
            f"{flag}: credentials in the URL are not supported (every endpoint URL is recorded with "
            "the results); put the key in the environment variable named by --api-key-env"
        )


def validate_settings(settings: Settings) -> None:
    """Range and consistency checks: one line naming the option and the fix."""
    positive = (
        "val_n",
        "concurrency_max",  # --concurrency: its parser takes a count >= 1 or auto
        "max_tokens",
        "max_attempts",
        "samples_per_request",
        "max_code_calls",
        "max_assistant_turns",
        "max_trajectory_tokens",
        "max_assistant_tokens",
        "max_tool_response_tokens",
        "llama_threads",
        "n_ctx",
        "gaia_max_steps",
    )
    for name in positive:
        if getattr(settings, name) < 1:
            flag = next(o.flag for o in OPTIONS if o.dest == name)
            raise pytest.UsageError(f"{flag} must be >= 1, got {getattr(settings, name)}")
    if settings.limit < 0 or settings.limit_per_category < 0 or settings.sandbox_workers < 0:
        raise pytest.UsageError("--limit, --limit-per-category and --sandbox-workers must be >= 0")
    if settings.temperature < 0:
        raise pytest.UsageError(f"--temperature must be >= 0, got {settings.temperature}")
    if not -2 <= settings.presence_penalty <= 2:
        raise pytest.UsageError(
            f"--presence-penalty must be within -2 to 2, got {settings.presence_penalty:g}"
        )
    if settings.bfcl_search_backend and not settings.bfcl_search_backend.startswith(("http://", "https://")):
        raise pytest.UsageError(
            f"--bfcl-search-backend must be an http(s) URL, got {settings.bfcl_search_backend!r}"
        )
    if not 0 < settings.top_p <= 1:
        raise pytest.UsageError(f"--top-p must be in (0, 1], got {settings.top_p}")
    if settings.sandbox_timeout <= 0 or settings.request_timeout <= 0:
        raise pytest.UsageError("--sandbox-timeout and --request-timeout must be > 0")
    if settings.idle_timeout <= 0:
        raise pytest.UsageError(f"--idle-timeout must be > 0 seconds, got {settings.idle_timeout:g}")
    if settings.think_tags:
        try:
            parse_think_tags(settings.think_tags)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
    for flag, urls in (("--endpoint", settings.endpoints), ("--judge-endpoint", settings.judge_endpoints)):
        for url in urls:
            check_endpoint_url(flag, url)
    if settings.endpoints and settings.model_path:
        raise pytest.UsageError(
            "--endpoint and --model-path conflict: evaluate one model per run "
            "(drop --model-path to use the server, or drop --endpoint)"
        )
    if settings.serve_timeout <= 0 or settings.serve_tp < 1:
        raise pytest.UsageError("--serve-timeout must be > 0 and --serve-tp >= 1")
    if settings.serve and settings.endpoints:
        raise pytest.UsageError("--serve launches a server for --model-path; drop it with --endpoint")
    if settings.serve and (settings.model_path or "").startswith(("replay:", "trio://", "tinker://")):
        raise pytest.UsageError(
            f"--serve launches a server for a .gguf, checkpoint, adapter or hub id, not for "
            f"--model-path {settings.model_path}; drop --serve"
        )
    if settings.serve_gpus:
        from pytest_agenteval.models.serve.commands import replica_devices

        try:
            replica_devices(settings.serve_gpus, settings.serve_tp)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
    if settings.tokenizer:
        from pytest_agenteval.models.tokens.template import tokenizer_from_file

        try:
            tokenizer_from_file(settings.tokenizer)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
    if settings.samples_per_request > settings.val_n:
        raise pytest.UsageError("--samples-per-request cannot exceed --val-n")
    for flag, value, low, high in (
        ("--datagen-opponents", settings.datagen_opponents, 0, 50),
        ("--datagen-reasks", settings.datagen_reasks, 0, 5),
        ("--datagen-solve", settings.datagen_solve, 0, 64),
    ):
        if not low <= value <= high:
            raise pytest.UsageError(f"{flag} must be within {low}-{high}, got {value}")


def check_model(settings: Settings, collect_only: bool = False, sdk_home: Path | None = None) -> ModelChoice:
    """Start-up checks of the model choice: one line naming the fix, never a traceback."""
    try:
        choice = choose_model(
            settings.model_path,
            settings.endpoints,
            settings.model_name,
            base_model=settings.base_model,
            chat_template=settings.chat_template,
        )
        if collect_only:
            return choice  # listing items needs no model and no server
        if choice.kind == "openai":
            api_key = api_key_from_env(settings.api_key_env)
            entries = {url: probe_models(url, api_key) for url in choice.endpoints}
            lists = {url: [str(m.get("id")) for m in listed] for url, listed in entries.items()}
            name = settings.model_name
            if name is None:
                first = lists[choice.endpoints[0]]
                if not first:
                    raise ValueError(f"{choice.endpoints[0]} lists no models; pass --model-name")
                name = first[0]
            for url, served in lists.items():  # every endpoint must serve the same model
                if served and name not in served:
                    raise ValueError(
                        f"--model-name {name!r} is not served by {url} "
                        f"(it serves: {', '.join(served)}); fix --model-name or the endpoint"
                    )
            # what each server says about its weights: the cache key's (models/identity.py)
            reported = tuple(model_entry(entries[url], name) for url in choice.endpoints)
            choice = ModelChoice("openai", endpoints=choice.endpoints, model_name=name, reported=reported)
            if settings.continuation == "tokens":
                for url in choice.endpoints:
                    probe_token_routes(url, name, api_key)
        elif choice.kind == "replay":
            assert choice.path is not None
            ReplaySource(choice.path)
        elif settings.serve:
            pass  # the launched server is checked by _start_servers
        elif choice.kind == "transformers":
            check_transformers(choice, settings)
        elif choice.kind in SDK_SCHEMES:  # trio:// and tinker://: key, base model, checkpoint
            refuse_presence_penalty(settings, f"{choice.kind}://")
            from pytest_agenteval.models.backends.sdk import open_session
            from pytest_agenteval.models.backends.sdk_adapters import adapter_for

            open_session(adapter_for(choice.kind), settings, sdk_home)
        else:
            import llama_cpp  # noqa: F401 - checked here so a missing build fails at start-up
    except ImportError as exc:
        raise pytest.UsageError(
            f"llama-cpp-python is not importable ({exc}); install it: pip install llama-cpp-python"
        ) from None
    except (ValueError, ReplayError) as exc:
        raise pytest.UsageError(str(exc)) from None
    return choice


def check_gates(settings: Settings) -> list[Any]:
    try:
        gates = [with_confidence(parse_gate(e), settings.gate_confidence) for e in settings.gates]
        for gate in gates:
            check_metric_name(gate, KNOWN_METRICS)
    except GateError as exc:
        raise pytest.UsageError(str(exc)) from None
    return gates


def check_selection(
    settings: Settings,
    suites: Mapping[str, Suite],
    gates: Sequence[Gate],
    baseline: Mapping[str, Mapping[str, float]] | None,
    complete: bool = True,
) -> list[str]:
    """After collection, before the first request, with the selected suites known (name ->
    suite; `complete`: every selected suite is known, not only some): a gate on a suite not
    selected, on a field that is not a number or on pass_at_k.K with K above N, and a
    baseline of other suites or another N, are usage errors. Returns the warnings: options
    the user set that have no effect on the selected suites. Nothing selected at all: the
    gates fail at the end, as docs/ci.md's exit table says."""
    if not suites:
        return []
    try:
        for gate in gates:
            suite = suites.get(gate.suite)
            if suite is None:
                if complete:
                    raise GateError(
                        f"--agenteval-gate {gate.expression!r}: suite {gate.suite} is not selected in this "
                        f"run (selected: {', '.join(sorted(suites))}); gate one of those, or select "
                        f"{gate.suite}'s tests"
                    )
                continue
            known = numeric_metrics(suite)  # a suite of its own: its fields are its own
            if known is not None:
                check_metric_name(gate, {gate.suite: known})
            check_pass_at_k(gate, suite.samples(settings))
    except GateError as exc:
        raise pytest.UsageError(str(exc)) from None
    gaia = any(builtin_kind(suite) == "gaia" for suite in suites.values())
    if gaia and settings.gaia_path and not Path(os.path.expanduser(settings.gaia_path)).exists():
        raise pytest.UsageError(  # only where GAIA runs: a shared ini's path must not stop others
            f"--gaia-path {settings.gaia_path}: no such folder; give the local GAIA dataset folder, "
            "or omit --gaia-path for the gated hub dataset (with HF_TOKEN)"
        )
    if baseline is not None and settings.compare:
        from pytest_agenteval.output.compare import BaselineError, check_baseline

        try:
            notes = check_baseline(
                Path(settings.compare),
                baseline,
                {n: s.samples(settings) for n, s in suites.items()},
                {n: s.version for n, s in suites.items()},
                settings.allow_version_change,
            )
        except BaselineError as exc:
            raise pytest.UsageError(str(exc)) from None
        for note in notes:  # the flag allowed it: said where the run starts
            sys.stderr.write(f"agenteval: {note}\n")
    if not complete:
        return []  # a suite not known here may read any option
    tags = {suite_tag(builtin_kind(suite), name, settings.mode) for name, suite in suites.items()}
    return unused_options(settings, tags)


def check_transformers(choice: ModelChoice, settings: Settings) -> None:
    """The in-process transformers backend: imports, chat template and the adapter probe,
    at start-up (one line on any problem)."""
    from pytest_agenteval.models.backends.checkpoint import check_checkpoint

    assert choice.path is not None
    refuse_presence_penalty(settings, "the in-process transformers backend")
    try:
        check_checkpoint(
            choice.path, choice.base, settings.llama_threads, settings.chat_template, settings.strict
        )
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def refuse_presence_penalty(settings: Settings, backend: str) -> None:
    """--presence-penalty on a backend that has none: an error, not a run without it."""
    if settings.presence_penalty:
        raise pytest.UsageError(
            f"--presence-penalty {settings.presence_penalty:g}: {backend} has no presence penalty; "
            "it works with --endpoint servers, --serve (vLLM, SGLang, llama.cpp) and in-process .gguf "
            "models, or drop it (a preset's: pass --presence-penalty 0)"
        )


def check_output(settings: Settings) -> None:
    """The results folder must take a file now, not after hours of generation."""
    target = Path(os.path.expanduser(settings.out)) if settings.out else Path(RESULTS_DIR) / "results.jsonl"
    try:
        check_writable(target)
    except OSError as exc:
        where = f"--agenteval-out {target}" if settings.out else f"the results folder {target.parent}"
        raise pytest.UsageError(
            f"{where}: not writable ({exc.strerror or exc}); choose a writable --agenteval-out path"
        ) from None


def check_sandbox_level(settings: Settings) -> None:
    """A level named with --sandbox-level that this machine cannot give stops the run now,
    rather than running model-written code in a weaker sandbox (auto takes what works)."""
    if settings.sandbox_level in ("auto", "basic"):
        return
    from pytest_agenteval.sandbox import probe_containment, shortfall

    try:
        problem = shortfall(probe_containment(settings.sandbox_level))  # one throwaway zygote
    except RuntimeError as exc:  # not even the basic level starts
        problem = str(exc)
    if problem:
        raise pytest.UsageError(
            f"--sandbox-level {settings.sandbox_level}: this machine cannot give it: {problem}; "
            "or pass --sandbox-level auto for the strongest level it gives"
        )


def check_suite_options(settings: Settings) -> None:
    """Suite options that would otherwise fail, or mislead, only after the whole run."""
    if settings.bfcl_weights:
        from pytest_agenteval.tasks.bfcl.suite import parse_weights

        try:
            parse_weights(settings.bfcl_weights)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
    if settings.bfcl_export_model:
        from pytest_agenteval.tasks.bfcl.export import check_export_model

        try:
            check_export_model(settings.bfcl_export_model, settings.bfcl_style)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
    if settings.judge_endpoints or settings.judge_models:
        from pytest_agenteval.tasks.datagen import check_judge_options

        check_judge_options(settings)


def check_native_style(settings: Settings, choice: ModelChoice) -> None:
    if settings.bfcl_style == "native" and choice.kind in ("embedded", "gguf", "transformers"):
        raise pytest.UsageError(
            "--bfcl-style native sends functions as `tools`, which in-process models do not take; "
            "use --bfcl-style prompting, or serve the model and pass --endpoint"
        )


def check_selected(
    config: pytest.Config,
    settings: Settings,
    gates: Sequence[Gate],
    suites: Mapping[str, Suite],
    complete: bool,
) -> None:
    """`check_selection` on the controller before the first request: errors stop the run
    (a usage error), each warning is one line."""
    if complete and settings.sequential:
        from pytest_agenteval.plugin.sequential import check_suites

        check_suites(settings, gates, suites)
    collector = config.pluginmanager.get_plugin("agenteval-results")
    warnings = check_selection(settings, suites, gates, getattr(collector, "baseline", None), complete)
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    for line in warnings:
        if terminal is not None:
            terminal.write_line(f"WARNING: agenteval: {line}", yellow=True)
        else:
            sys.stderr.write(f"WARNING: agenteval: {line}\n")


def preload_suites(config: pytest.Config) -> None:
    """Import the run's suite modules on the xdist controller as its workers start, so that
    naming the selected suites once they have collected takes no time then."""
    for path in suite_files(config):
        with contextlib.suppress(SuiteImportError):  # said at the summary, as before
            suite_of_file(path.resolve())


def suites_of_ids(config: pytest.Config, ids: Sequence[str]) -> tuple[dict[str, Suite], bool]:
    """The suites of a worker's collected node ids, imported here as the summary imports
    them, and whether all are known (a file this machine lacks or cannot import is not)."""
    suites: dict[str, Suite] = {}
    complete = True
    for name in dict.fromkeys(str(nodeid).split("::")[0] for nodeid in ids):
        paths = files_of_nodeid(config, name)
        if not paths:
            complete = False
        for path in paths[:1] if name else paths:  # "": every file named on the command line
            if not declares_suite(path):
                continue
            try:
                suite = suite_of_file(path)
            except SuiteImportError:  # said at the summary, as before
                suite = None
            if suite is None:
                complete = False
            else:
                suites[suite.name] = suite
    return suites, complete
