"""Fixtures of the transformers-backend tests: SmolLM2 loaded from its gguf and saved as a
real checkpoint folder, and real peft LoRA adapters on top (a seeded random one and peft's
default zero one). Built once per run, shared by xdist workers through a file lock, and
never committed: everything lives in pytest's tmp folders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

# No skip here: a conftest that skips at import stops `pytest tests/transformers` with a
# traceback. Each test module calls skip_without_backend() (tests/transformers/__init__.py),
# and these fixtures import torch, peft and transformers only when a test asks for them.


def _shared_dir(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """A folder all xdist workers of this run see (their base temps' parent)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if worker_id != "master" else base


def _build_once(folder: Path, build: Any) -> Path:
    """Build `folder` once per run, whichever worker comes first; the others wait."""
    from filelock import FileLock

    with FileLock(str(folder) + ".lock"):
        if not (folder / ".done").is_file():
            folder.mkdir(parents=True, exist_ok=True)
            build(folder)
            (folder / ".done").write_text("ok", encoding="utf-8")
    return folder


def _save_checkpoint(folder: Path) -> None:
    """SmolLM2 from its gguf, dequantized to fp32, saved with save_pretrained."""
    from pytest_agenteval.testing.models import make_hf_checkpoint

    make_hf_checkpoint(folder)


def save_adapter(base: Path, folder: Path, *, random_b: bool, seed: int = 0) -> None:
    """A LoRA (r=8 on q_proj and v_proj) on `base`: with `random_b`, B != 0 (a live
    adapter); peft's default has B = 0 (testing/models.py make_peft_adapter, public)."""
    from pytest_agenteval.testing.models import make_peft_adapter

    make_peft_adapter(base, folder, seed=seed, live=random_b)


@pytest.fixture(scope="session")
def hf_checkpoint(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    return _build_once(_shared_dir(tmp_path_factory, worker_id) / "smollm2-ckpt", _save_checkpoint)


@pytest.fixture(scope="session")
def live_adapter(hf_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    folder = _shared_dir(tmp_path_factory, worker_id) / "lora-random"
    return _build_once(folder, lambda f: save_adapter(hf_checkpoint, f, random_b=True))


@pytest.fixture(scope="session")
def zero_adapter(hf_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    folder = _shared_dir(tmp_path_factory, worker_id) / "lora-zero"
    return _build_once(folder, lambda f: save_adapter(hf_checkpoint, f, random_b=False))
