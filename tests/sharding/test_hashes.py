"""The hashes of a shard object (`output/summary.py`): what makes two shards one
evaluation, as tables."""

from __future__ import annotations

import pytest

from pytest_agenteval.config.settings import Settings
from pytest_agenteval.output.summary import config_hash, model_hash, selection_hash

BASE = Settings().as_dict()


@pytest.mark.parametrize(
    ("change", "same"),
    [
        # run-local options (Option.local): where and how a shard did its work
        ({"endpoints": ("http://node7:8000/v1",)}, True),
        ({"concurrency": 64, "request_timeout": 30.0, "max_attempts": 2}, True),
        ({"out": "shard-3.jsonl", "cache_dir": "/scratch/cache", "progress": "off"}, True),
        ({"gates": ("aime25.average_at_n >= 0.3",), "compare": "old.jsonl"}, True),
        ({"shard": "3/8", "shard_count": 8}, True),
        # what a run produces
        ({"val_n": 4}, False),
        ({"temperature": 0.7}, False),
        ({"seed": 7}, False),
        ({"model_path": "/ckpt/step-900"}, False),
        ({"dataset_path": "other.jsonl"}, False),
    ],
)
def test_the_config_hash_leaves_out_the_run_local_options(change: dict, same: bool) -> None:
    assert (config_hash({**BASE, **change}) == config_hash(BASE)) is same


def test_the_config_hash_counts_which_options_were_given() -> None:
    # BFCL runs N=1 unless --val-n is given: the same value, given or not, is another run
    assert config_hash(BASE, ["val_n"]) != config_hash(BASE)
    assert config_hash(BASE, ["endpoints"]) == config_hash(BASE)  # run-local


SERVED = {
    "backend": "openai",
    "label": "step-800",
    "name": "step-800",
    "display": "step-800 (vllm, launched)",
    "served": {
        "label": "step-800",
        "fingerprint": "ab12",
        "logs": {"http://127.0.0.1:8001/v1": "/tmp/a.log"},
    },
    "endpoints": ["http://127.0.0.1:8001/v1"],
}


@pytest.mark.parametrize(
    ("change", "same"),
    [
        ({"endpoints": ["http://127.0.0.1:9002/v1"]}, True),
        ({"served": {**SERVED["served"], "logs": {"http://127.0.0.1:9002/v1": "/tmp/b.log"}}}, True),
        ({"path": "/node7/model.gguf"}, True),
        ({"reported": [{"id": "m", "created": 1}]}, False),  # the entry itself is identity
        ({"served": {**SERVED["served"], "fingerprint": "cd34"}}, False),  # other weights
        ({"name": "step-900"}, False),
    ],
)
def test_the_model_hash_leaves_out_what_differs_between_machines(change: dict, same: bool) -> None:
    assert (model_hash({**SERVED, **change}) == model_hash(SERVED)) is same


def test_the_reported_entries_are_hashed_without_their_start_time() -> None:
    assert model_hash({**SERVED, "reported": [{"id": "m", "created": 1}]}) == model_hash(
        {**SERVED, "reported": [{"id": "m", "created": 2}]}
    )


def test_the_selection_hash_is_of_the_set_of_node_ids() -> None:
    assert selection_hash(["a", "b", "c"]) == selection_hash(["c", "a", "b"])
    assert selection_hash(["a", "b"]) != selection_hash(["a", "b", "c"])
