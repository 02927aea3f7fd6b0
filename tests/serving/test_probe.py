"""The adapter-is-live comparison (shared with the transformers backend)."""

from __future__ import annotations

import pytest

from pytest_agenteval.serving.probe import adapter_is_live


@pytest.mark.parametrize(
    ("base", "adapter", "live"),
    [
        ([-0.5, -1.25, -0.01], [-0.5, -1.25, -0.01], False),  # identical: not applied
        ([-0.5, -1.25], [-0.5, -1.25 + 1e-8], False),  # fp noise
        ([-0.5, -1.25], [-0.5, -1.30], True),
        ([-0.5, -1.25], [-0.5], True),  # different greedy tokens, different lengths
        ([], [], False),  # nothing measured proves nothing
    ],
)
def test_adapter_is_live(base: list[float], adapter: list[float], live: bool) -> None:
    assert adapter_is_live(base, adapter) is live
