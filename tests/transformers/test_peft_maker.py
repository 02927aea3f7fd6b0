"""testing/models.py's PEFT adapter maker (public, for users' sweep tests): the same seed
gives the same adapter weights, another seed others, and the zero adapter has B = 0."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pytest_agenteval.testing.models import make_peft_adapter
from tests.transformers import skip_without_backend

skip_without_backend()  # the imports above need none of the backend's packages


def weights_sha256(folder: Path) -> str:
    return hashlib.sha256((folder / "adapter_model.safetensors").read_bytes()).hexdigest()


def test_the_same_seed_gives_the_same_adapter(
    hf_checkpoint: Path, live_adapter: Path, tmp_path: Path
) -> None:
    again = make_peft_adapter(hf_checkpoint, tmp_path / "again", seed=0)
    other = make_peft_adapter(hf_checkpoint, tmp_path / "other", seed=1)
    assert weights_sha256(again) == weights_sha256(live_adapter)  # the conftest's, made the same way
    assert weights_sha256(other) != weights_sha256(live_adapter)
    config = json.loads((again / "adapter_config.json").read_text())
    shape = (config["r"], config["lora_alpha"], sorted(config["target_modules"]))
    assert shape == (8, 16, ["q_proj", "v_proj"])


def test_the_zero_adapter_has_b_zero(zero_adapter: Path) -> None:
    from safetensors.numpy import load_file

    tensors = load_file(str(zero_adapter / "adapter_model.safetensors"))
    b = [t for name, t in tensors.items() if "lora_B" in name]
    a = [t for name, t in tensors.items() if "lora_A" in name]
    assert len(b) == len(a) == 30 * 2
    assert all(not t.any() for t in b) and all(t.any() for t in a)
