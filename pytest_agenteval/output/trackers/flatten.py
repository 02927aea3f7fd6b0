"""A summary line as a tracker takes it: metrics with stable flattened names
(`aime25/average_at_n`, `aime25/pass_at_k/4`, `bfcl/per_category/simple_python/accuracy`,
`gaia/level_2/accuracy`, `aime25/average_at_n/ci95_low`), the gate verdicts as 1/0 metrics
and tags, and the configuration and reproducibility record as string params. Values are
logged as the summary holds them: unrounded."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_agenteval.config.redact import without_credentials
from pytest_agenteval.config.table import OPTIONS
from pytest_agenteval.models.identity import reported_fingerprint

# top-level fields that are configuration, identity or bookkeeping, not metrics
_NOT_METRICS = frozenset(
    {
        "config", "versions", "model", "selection", "sandbox", "errors", "missing", "storage",
        "backend", "concurrency", "stalls", "ci95", "ci95_method", "ci95_undefined_resamples",
        "gates", "compare", "merged", "budget", "shard", "sequential", "preset", "harness",
        "tokens", "requests", "cost", "duration_s", "temperature", "top_p", "top_k", "max_tokens",
        "presence_penalty", "val_n", "workers", "seed", "not_scored", "incomplete",
    }
)  # fmt: skip
_LENGTH_SETTINGS = frozenset({"max_tokens", "warn_share"})  # the `length` block's configuration
# the resource metrics (`tokens/prompt`, `requests/retries`, `cost/usd`, `wall_time_s`): a rerun
# from the cache changes them and nothing else, so they stay out of the fingerprint
RESOURCES = ("tokens", "requests", "cost", "wall_time_s")
_PARAMS = ("mode", "dataset", "dataset_path", "dataset_sha256", "dataset_revision", "scorer")
_PARAMS += ("scorer_version", "suite_version", "val_n", "temperature", "top_p", "top_k", "max_tokens")
_MODEL_PARAMS = ("name", "backend", "sha256", "path", "revision", "base_sha256", "display")
_UNSAFE = re.compile(r"[^A-Za-z0-9_\-. :/]+")  # what MLflow takes in a metric, param or tag key
_OPERATORS = ((">=", " ge "), ("<=", " le "), ("==", " eq "), ("!=", " ne "), (">", " gt "), ("<", " lt "))
_OPERATORS += (("+", " plus "), ("@", " at "))


def safe_key(text: str) -> str:
    """A name every tracker takes: MLflow's characters only (`[` `]` `+` become `_`)."""
    return re.sub(r"_+", "_", _UNSAFE.sub("_", text)).strip("_ ")


def gate_key(expression: str) -> str:
    """`aime25.average_at_n >= 0.3` -> `aime25.average_at_n ge 0.3` (no operators in a key)."""
    for operator, word in _OPERATORS:
        expression = expression.replace(operator, word)
    return safe_key(re.sub(r"\s+", " ", expression))


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    return None


def _walk(prefix: str, value: Any, out: dict[str, float]) -> None:
    number = _number(value)
    if number is not None:
        out[safe_key(prefix)] = number
    elif isinstance(value, Mapping):
        for key, inner in value.items():
            _walk(f"{prefix}/{key}", inner, out)


def metrics_of(summary: Mapping[str, Any]) -> dict[str, float]:
    """Every metric of one summary line, named `<suite>/...`: the numbers at its top level and
    in its metric blocks (`pass_at_k`, `per_category`, GAIA's `per_level` as `level_N`), each
    interval's bounds, the length block's counts and shares, tokens, requests, cost (USD) and
    wall time, and each gate's verdict (`<suite>/gates/<gate>`: 1 passed, 0 not)."""
    suite = str(summary["suite"])
    out: dict[str, float] = {}
    for key, value in summary.items():
        if key in _NOT_METRICS:
            continue
        if key == "per_level" and isinstance(value, Mapping):
            for level, block in value.items():
                _walk(f"{suite}/level_{level}", block, out)
        elif key == "length" and isinstance(value, Mapping):
            kept = {k: v for k, v in value.items() if k not in _LENGTH_SETTINGS}
            _walk(f"{suite}/length", kept, out)
        else:
            _walk(f"{suite}/{key}", value, out)
    for metric, bounds in (summary.get("ci95") or {}).items():
        if isinstance(bounds, Sequence) and len(bounds) == 2 and all(_number(b) is not None for b in bounds):
            out[safe_key(f"{suite}/{metric}/ci95_low")] = float(bounds[0])
            out[safe_key(f"{suite}/{metric}/ci95_high")] = float(bounds[1])
    _walk(f"{suite}/tokens", summary.get("tokens") or {}, out)
    _walk(f"{suite}/requests", summary.get("requests") or {}, out)
    usd = _number((summary.get("cost") or {}).get("usd"))
    if usd is not None:
        out[f"{suite}/cost/usd"] = usd
    if _number(summary.get("duration_s")) is not None:
        out[f"{suite}/wall_time_s"] = float(summary["duration_s"])
    for gate in summary.get("gates") or ():
        out[f"{suite}/gates/{gate_key(str(gate['gate']))}"] = 1.0 if gate.get("passed") else 0.0
    return out


def gate_tags(summary: Mapping[str, Any], label: str | None = None) -> dict[str, str]:
    """Each gate's verdict as a tag, `gate/<gate>` (`gate/<label>/<gate>` in a run of several
    models): `PASS`, `FAIL` or `UNDECIDED`, then the gate and why."""
    tags = {}
    for gate in summary.get("gates") or ():
        verdict = gate.get("verdict") or ("PASS" if gate.get("passed") else "FAIL")
        where = f"gate/{label}/" if label else "gate/"
        tags[safe_key(where + gate_key(str(gate["gate"])))] = (
            f"{verdict} {gate['gate']} ({gate.get('reason')})"
        )
    return tags


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def model_params(summary: Mapping[str, Any], prefix: str = "model") -> dict[str, str]:
    """The model's identity (`model/name`, `model/sha256`, ...); an `--endpoint` model's is what
    its servers report: `model/fingerprint` (the generation cache's, over each endpoint's
    /v1/models entry), `model/root` (the weights vLLM and SGLang name), `model/location` (the
    endpoints, without credentials)."""
    model = summary.get("model") or {}
    params = {
        f"{prefix}/{key}": _text(model[key]) for key in _MODEL_PARAMS if model.get(key) not in (None, "")
    }
    reported = [e for e in model.get("reported") or () if isinstance(e, Mapping)]
    if reported:
        params[f"{prefix}/fingerprint"] = reported_fingerprint(model["reported"])
        roots = sorted({str(e["root"]) for e in reported if e.get("root")})
        if roots:
            params[f"{prefix}/root"] = ", ".join(roots)
    if model.get("endpoints"):
        params[f"{prefix}/location"] = without_credentials(", ".join(map(str, model["endpoints"])))
    elif model.get("location"):
        params[f"{prefix}/location"] = without_credentials(str(model["location"]))
    return params


def run_params(summary: Mapping[str, Any]) -> dict[str, str]:
    """What reproduces a suite's numbers: the seed, N, the data's hash, the suite's and the
    scorer's versions, the sampling, the harness's version, and the whole configuration
    (`config/<option>`)."""
    suite = str(summary["suite"])
    config = summary.get("config") or {}
    params = {"seed": _text(config.get("seed")), "val_n": _text(summary.get("val_n"))}
    params.update(
        {f"{suite}/{key}": _text(summary[key]) for key in _PARAMS if summary.get(key) not in (None, "")}
    )
    version = (summary.get("versions") or {}).get("pytest-agenteval")
    if version:
        params["pytest-agenteval"] = str(version)
    for key, value in config.items():
        if value not in (None, "", [], (), {}):
            params[safe_key(f"config/{key}")] = _text(value)[:500]
    return params


def _reproducible(summary: Mapping[str, Any]) -> dict[str, str]:
    """The params that say what produced the numbers: the reproducibility record, the model's
    identity and the configuration less its run-local options (`Option.local`: paths,
    endpoints, concurrency, timeouts, gates, the trackers themselves) and the data's path,
    which a rerun of the same evaluation may change."""
    local = {option.dest for option in OPTIONS if option.local}
    config = {k: v for k, v in (summary.get("config") or {}).items() if k not in local}
    params = {**run_params({**summary, "config": config}), **model_params(summary)}
    # where the data, the weights and the servers are: their sha256s and the model's fingerprint
    # say what they are, and a rerun from a moved folder or another port is the same evaluation
    where = {f"{summary['suite']}/dataset_path", "model/location", "model/path"}
    return {k: v for k, v in params.items() if k not in where and not k.endswith("_path")}


def fingerprint(uri: str, label: str, step: int | None, summaries: Sequence[Mapping[str, Any]]) -> str:
    """What was logged, less what a rerun from the cache changes (the resource metrics): the
    same fingerprint is the same numbers, of the same model, data and configuration (the
    sampling, the mode, the suite's version, the seed...), to the same place."""
    metrics: dict[str, float] = {}
    for summary in summaries:
        metrics.update(metrics_of(summary))
    scored = {k: v for k, v in metrics.items() if k.split("/")[1] not in RESOURCES}
    record = [_reproducible(s) for s in summaries]
    text = json.dumps([uri, label, step, scored, record], sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
