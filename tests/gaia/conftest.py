"""Fixtures for the GAIA tests: synthetic datasets in both on-disk layouts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from . import make_synthetic


@pytest.fixture
def synthetic() -> ModuleType:
    """The synthetic-data module: task tables, expected verdicts, writers."""
    return make_synthetic


@pytest.fixture
def make_gaia(tmp_path: Path) -> Callable[..., Path]:
    """Factory: write the synthetic dataset in a layout under tmp_path; returns its root."""

    def make(layout: make_synthetic.Layout = "parquet", name: str = "gaia") -> Path:
        return make_synthetic.make_synthetic_gaia(tmp_path / name, layout)

    return make


@pytest.fixture(params=["parquet", "jsonl"])
def gaia_root(request: pytest.FixtureRequest, make_gaia: Callable[..., Path]) -> Path:
    """The synthetic dataset root, once per layout."""
    return make_gaia(request.param)


@pytest.fixture
def no_hf_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """No token in the environment and no stored `hf auth login` token."""
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setattr("pytest_agenteval.tasks.gaia._data._stored_token", lambda: None)
