"""The Ray recipe's tests and the Kubernetes manifests' check need ray (README command 2)
and PyYAML (command 1: huggingface_hub, of the gaia extra, requires it). Without them they
skip saying what to install; under AGENTEVAL_CI=1 they fail instead (tests/_oracle.py), so a
broken install cannot pass by skipping. The package is hidden from a real pytest run of the
real modules (`sys.modules[name] = None`: its import raises ImportError). One run a setting
hides both packages and runs both modules (neither needs the other's package); each case
asserts on that run's output what it asserted on a run of its own."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HIDDEN_RUN = (
    "import sys; sys.modules.update(dict.fromkeys(sys.argv[1].split(','))); import pytest; "
    "sys.exit(pytest.main(['-q', '-rsE', '-p', 'no:randomly', '-p', 'no:cacheprovider', *sys.argv[2:]]))"
)
CASES = [
    (
        "ray",
        "tests/cluster/test_ray.py",
        "Ray is not installed: pip install -e '.[ray]' (README command 2; the Ray recipe's tests)",
    ),
    (
        "yaml",
        "tests/cluster/test_k8s_manifests.py",
        "PyYAML is not installed: pip install -e '.[all]' (README command 1) to check the Kubernetes "
        "manifests",
    ),
]


@functools.cache
def hidden_run(ci: str) -> subprocess.CompletedProcess[str]:
    """pytest on every case's module with every case's package hidden, AGENTEVAL_CI=ci."""
    env = {**os.environ, "AGENTEVAL_CI": ci, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-c", HIDDEN_RUN, ",".join(c[0] for c in CASES), *(c[1] for c in CASES)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("ci", ["", "1"], ids=["developer", "ci"])
@pytest.mark.parametrize("reason", [case[2] for case in CASES], ids=[case[0] for case in CASES])
def test_a_missing_optional_package_skips_and_fails_in_ci(reason: str, ci: str) -> None:
    done = hidden_run(ci)
    out = done.stdout
    if ci:
        assert done.returncode == 1, out
        assert f"{reason} (AGENTEVAL_CI=1: an oracle test may not skip)" in out, out
        assert "skipped" not in out.splitlines()[-1], out
    else:
        assert done.returncode == 0, out
        assert reason in out and "skipped" in out.splitlines()[-1] and "error" not in out.splitlines()[-1], (
            out
        )
