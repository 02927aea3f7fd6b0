"""The adapter-is-live comparison (shared with the transformers backend)."""

from __future__ import annotations

import pytest

from pytest_agenteval.models.serve.probe import adapter_is_live


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


def test_probe_over_http_on_a_real_server_sees_a_no_op_adapter(llama_server: str) -> None:
    """The same weights under both names (as a zero or unapplied adapter would be): the
    greedy logprobs match exactly, so the probe says not live."""
    from pytest_agenteval.models.serve.probe import PROBE_TOKENS, probe_adapter

    result = probe_adapter(llama_server, None, "smollm2", "smollm2")
    assert len(result["base_logprobs"]) == PROBE_TOKENS
    assert result["base_logprobs"] == result["adapter_logprobs"]
    assert result["live"] is False


def test_a_dead_adapter_is_a_recorded_warning_and_with_strict_an_error(llama_server: str, tmp_path) -> None:
    from types import SimpleNamespace

    from pytest_agenteval.models.serve.commands import ServerSpec
    from pytest_agenteval.models.serve.launcher import LaunchedServer, LaunchError
    from pytest_agenteval.models.serve.resolve import ResolvedModel
    from pytest_agenteval.models.serve.session import Launch, _probe_adapters

    port = int(llama_server.rsplit(":", 1)[1].split("/")[0])
    spec = ServerSpec("vllm", (), port, "smollm2", None, adapters={"smollm2": str(tmp_path)})
    server = LaunchedServer(spec, tmp_path / "log", None, 0, reused=True)
    run = Launch(ResolvedModel("adapter", tmp_path, "x"), [server], "x")
    lines: list[str] = []
    _probe_adapters(run, SimpleNamespace(strict=False), lines.append)
    expected = (
        "adapter smollm2 gives the same greedy logprobs as its base smollm2: it is not applied or is a "
        "no-op (step 0?); the numbers will be the base model's"
    )
    assert run.warnings == [expected]
    assert lines == [f"agenteval: WARNING: {expected}"]
    assert run.describe()["adapter_probe"]["live"] is False
    with pytest.raises(LaunchError, match=r"the numbers will be the base model's \(--strict-adapter\)$"):
        _probe_adapters(run, SimpleNamespace(strict=True), lines.append)
