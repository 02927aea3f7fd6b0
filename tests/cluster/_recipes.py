"""What the tests of the Kubernetes and Ray recipes share: the test server's answers for the
tiny AIME problems, and the environment of the processes they start."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# problems 0 and 1 solved, 2 and 3 not (tests.conftest.TINY_PROBLEMS): average@2 is 0.5
ANSWERS = {"30 + 40": "easy: \\boxed{70}", "12 * 49": "\\boxed{588}", "power 4": "\\boxed{15}"}


def child_environment() -> dict[str, str]:
    """This environment for a child process, with this checkout first on the path (Ray's
    workers inherit it), and without a scheduler's variables (SLURM's would take precedence
    over `--agenteval-shard auto`'s Kubernetes index) or a Ray cluster's address."""
    environ = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("SLURM_") and key not in ("RAY_ADDRESS", "JOB_COMPLETION_INDEX")
    }
    environ["PYTHONPATH"] = os.pathsep.join([str(REPO), environ.get("PYTHONPATH", "")])
    return environ
