"""The `slurm_cluster` fixture: a real single-node SLURM cluster (tests/cluster/slurm.py),
started once for the folder's modules (a worker of -n 2 starts its own) and stopped after
them; each test waits for its own jobs, so none sees another's. Without slurm-wlm and
munge, or not as root, its tests skip saying so; under AGENTEVAL_CI=1 (.ci/run, root) they
fail instead: a missing cluster in CI must not pass by skipping."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._oracle import require_oracle
from tests.cluster.slurm import SlurmCluster, why_no_cluster


@pytest.fixture(scope="package")
def slurm_cluster() -> Iterator[SlurmCluster]:
    reason = why_no_cluster()
    if reason is not None:
        require_oracle(reason)
    # not under pytest's basetemp (0700): munged refuses a socket on a path others cannot enter
    folder = Path(tempfile.mkdtemp(prefix="agenteval-slurm-"))
    folder.chmod(0o755)
    env = {**os.environ, "SLURM_CONF": str(folder / "slurm.conf")}
    for name in [n for n in env if n.startswith(("SLURM_", "SBATCH_", "SQUEUE_")) and n != "SLURM_CONF"]:
        del env[name]  # a test session inside a SLURM job must not submit into that job's cluster
    cluster = SlurmCluster(folder, env)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(folder, ignore_errors=True)
