"""The names and values a tracker gets from summary lines: stable flattened names,
unrounded values, interval bounds, gate verdicts as 1/0 and tags, params."""

from __future__ import annotations

import pytest

from pytest_agenteval.output.trackers.flatten import (
    fingerprint,
    gate_key,
    gate_tags,
    metrics_of,
    model_params,
    run_params,
)

AIME = {
    "type": "summary",
    "suite": "aime25",
    "val_n": 4,
    "temperature": 1.0,
    "average_at_n": 1 / 3,
    "pass_at_k": {"1": 0.25, "4": 0.5},
    "ci95": {"average_at_n": [0.1, 0.6], "maj_at_n": [None, None]},
    "complete": True,
    "tokens": {"prompt": 120, "completion": 4000},
    "requests": {"generations": 48, "attempts": 50, "retries": 2, "cached_generations": 0},
    "cost": {"usd": 0.0125, "billed_as": "gpt-x"},
    "duration_s": 12.5,
    "length": {"hit_max_tokens_share": 0.125, "max_tokens": 8192, "warn_share": 0.1},
    "gates": [{"gate": "aime25.average_at_n >= 0.3", "passed": True, "reason": "0.333 >= 0.3"}],
    "model": {"name": "ckpt", "backend": "openai", "sha256": "ab12", "label": "ckpt"},
    "dataset_sha256": "d00d",
    "suite_version": "2",
    "config": {"seed": 7, "val_n": 4, "model_paths": ["step-200=ckpts/200"], "endpoints": []},
}
BFCL = {"suite": "bfcl", "accuracy": 0.75, "per_category": {"simple_python": {"accuracy": 0.9, "total": 10}}}
GAIA = {"suite": "gaia", "accuracy": 0.4, "per_level": {"2": {"accuracy": 0.375, "correct": 3, "total": 8}}}


@pytest.mark.parametrize(
    ("summary", "name", "value"),
    [
        (AIME, "aime25/average_at_n", 1 / 3),  # unrounded
        (AIME, "aime25/pass_at_k/4", 0.5),
        (AIME, "aime25/average_at_n/ci95_low", 0.1),
        (AIME, "aime25/average_at_n/ci95_high", 0.6),
        (AIME, "aime25/complete", 1.0),
        (AIME, "aime25/tokens/completion", 4000.0),
        (AIME, "aime25/requests/retries", 2.0),
        (AIME, "aime25/cost/usd", 0.0125),
        (AIME, "aime25/wall_time_s", 12.5),
        (AIME, "aime25/length/hit_max_tokens_share", 0.125),
        (AIME, "aime25/gates/aime25.average_at_n ge 0.3", 1.0),
        (BFCL, "bfcl/accuracy", 0.75),
        (BFCL, "bfcl/per_category/simple_python/accuracy", 0.9),
        (GAIA, "gaia/level_2/accuracy", 0.375),
        (GAIA, "gaia/level_2/total", 8.0),
    ],
)
def test_a_metric_has_its_stable_name_and_exact_value(summary: dict, name: str, value: float) -> None:
    assert metrics_of(summary)[name] == value


@pytest.mark.parametrize(
    "name",
    [
        "aime25/val_n",  # a param
        "aime25/temperature",
        "aime25/length/max_tokens",  # configuration, not a measurement
        "aime25/maj_at_n/ci95_low",  # an undefined interval
        "aime25/model/sha256",
        "aime25/config/seed",
        "aime25/duration_s",  # as wall_time_s
    ],
)
def test_configuration_is_not_a_metric(name: str) -> None:
    assert name not in metrics_of(AIME)


@pytest.mark.parametrize(
    ("expression", "key"),
    [
        ("aime25.average_at_n >= 0.3", "aime25.average_at_n ge 0.3"),
        ("aime25[step-200].average_at_n >= aime25[base].average_at_n + 0.02",
         "aime25_step-200_.average_at_n ge aime25_base_.average_at_n plus 0.02"),
        ("bfcl.accuracy < 0.5 @ 0.95", "bfcl.accuracy lt 0.5 at 0.95"),
    ],
)  # fmt: skip
def test_a_gate_becomes_a_key_every_tracker_takes(expression: str, key: str) -> None:
    assert gate_key(expression) == key


def test_a_gate_verdict_is_a_tag_too() -> None:
    assert gate_tags(AIME) == {
        "gate/aime25.average_at_n ge 0.3": "PASS aime25.average_at_n >= 0.3 (0.333 >= 0.3)"
    }
    assert list(gate_tags(AIME, "step-200")) == ["gate/step-200/aime25.average_at_n ge 0.3"]


def test_the_params_hold_the_model_identity_seed_n_data_hash_and_suite_version() -> None:
    params = {**run_params(AIME), **model_params(AIME)}
    assert {k: params[k] for k in ("seed", "val_n", "aime25/dataset_sha256", "aime25/suite_version")} == {
        "seed": "7",
        "val_n": "4",
        "aime25/dataset_sha256": "d00d",
        "aime25/suite_version": "2",
    }
    assert (params["model/name"], params["model/sha256"], params["model/backend"]) == (
        "ckpt",
        "ab12",
        "openai",
    )
    assert params["config/model_paths"] == '["step-200=ckpts/200"]'
    assert "config/endpoints" not in params  # empty


def test_a_rerun_from_the_cache_has_the_same_fingerprint_and_a_changed_score_another() -> None:
    cached = {**AIME, "duration_s": 0.4, "requests": {**AIME["requests"], "cached_generations": 48}}
    first = fingerprint("mlflow:http://h", "step-200", 200, [AIME])
    assert fingerprint("mlflow:http://h", "step-200", 200, [cached]) == first
    assert fingerprint("mlflow:http://h", "step-200", 200, [{**AIME, "average_at_n": 0.5}]) != first
    assert fingerprint("wandb:p", "step-200", 200, [AIME]) != first


@pytest.mark.parametrize(
    "changed",
    [
        {"temperature": 0.6},
        {"top_p": 0.95},
        {"max_tokens": 4096},
        {"mode": "retool"},
        {"suite_version": "3"},
        {"scorer_version": "2"},
        {"model": {**AIME["model"], "sha256": "cd34"}},
        {"model": {**AIME["model"], "name": "other"}},
        {"config": {**AIME["config"], "temperature": 0.6}},
        {"config": {**AIME["config"], "top_p": 0.95}},
        {"config": {**AIME["config"], "max_tokens": 4096}},
        {"config": {**AIME["config"], "seed": 8}},
        {"versions": {"pytest-agenteval": "0.2.0"}},
    ],
)
def test_the_same_numbers_under_another_configuration_are_another_fingerprint(changed: dict) -> None:
    first = fingerprint("mlflow:http://h", "step-200", 200, [AIME])
    assert fingerprint("mlflow:http://h", "step-200", 200, [{**AIME, **changed}]) != first


@pytest.mark.parametrize(
    "changed",
    [
        {"config": {**AIME["config"], "log_always": True}},  # where and how the run worked
        {"config": {**AIME["config"], "concurrency": 8}},
        {"config": {**AIME["config"], "out": "elsewhere.jsonl"}},
        {"finished_at": "2026-12-07T00:00:00Z"},
        {"dataset_path": "/elsewhere/problems.jsonl"},  # the same data (its sha256), moved
        # the option too (a reviewer's find: config/dataset_path stayed in), and the endpoints
        {"dataset_path": "/b/x.jsonl", "config": {**AIME["config"], "dataset_path": "/b/x.jsonl"}},
        {
            "model": {
                **AIME["model"],
                "endpoints": ["http://127.0.0.1:9999/v1"],
                "location": "http://127.0.0.1:9999/v1",
            }
        },
    ],
)
def test_run_local_options_are_not_in_the_fingerprint(changed: dict) -> None:
    first = fingerprint("mlflow:http://h", "step-200", 200, [AIME])
    assert fingerprint("mlflow:http://h", "step-200", 200, [{**AIME, **changed}]) == first


ENDPOINT_MODEL = {
    "backend": "openai",
    "label": "served",
    "name": "policy",
    "endpoints": ["http://u:pw@10.0.0.1:8000/v1", "http://10.0.0.2:8000/v1"],
    "reported": [{"id": "policy", "root": "/ckpts/step-200"}, {"id": "policy", "root": "/ckpts/step-200"}],
    "weights_identified": True,
    "revision": "step-200",
}


def test_an_endpoint_model_s_params_hold_what_identifies_its_weights() -> None:
    from pytest_agenteval.models.identity import reported_fingerprint

    params = model_params({**AIME, "model": ENDPOINT_MODEL})
    assert {k: v for k, v in params.items() if k != "model/display"} == {
        "model/name": "policy",
        "model/backend": "openai",
        "model/revision": "step-200",
        "model/fingerprint": reported_fingerprint(ENDPOINT_MODEL["reported"]),
        "model/root": "/ckpts/step-200",
        "model/location": "http://10.0.0.1:8000/v1, http://10.0.0.2:8000/v1",
    }
