"""A tracker's library says nothing of its own: a logged target is our one line, a failed one
our one warning line; and the whole logging, the library's teardown included, ends by the
deadline, against a host that accepts connections and never answers."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._oracle import require_oracle

# One model's results logged to one target with a short deadline, in a process of its own
# (what is measured is when that process ends): the lines it prints, as JSON.
SCRIPT = textwrap.dedent(
    """
    import json, sys
    from pytest_agenteval.output.trackers import ModelResults, check_targets, log_results

    summary = {"suite": "aime25", "average_at_n": 0.5, "config": {"seed": 1}, "model": {"name": "m"}}
    (target,) = check_targets([sys.argv[1]])
    lines = log_results([target], [ModelResults("step-100", 100, (summary,), None)], deadline_s=3)
    print(json.dumps(lines))
    """
)


@pytest.fixture
def silent_host() -> Iterator[str]:
    """A loopback port whose connections are accepted (the kernel's backlog) and never answered."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(64)
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


def test_wandb_against_a_host_that_never_answers_is_one_line_and_the_process_ends_by_the_deadline(
    silent_host: str, tmp_path: Path
) -> None:
    try:
        import wandb  # noqa: F401
    except ImportError:
        require_oracle("needs wandb: pip install -e '.[wandb]' (README command 2)")
    env = {
        **__import__("os").environ,
        "WANDB_MODE": "online",
        "WANDB_BASE_URL": silent_host,
        "WANDB_API_KEY": "0123456789abcdef0123456789abcdef01234567",
        "WANDB_DIR": str(tmp_path),
        "WANDB_CONFIG_DIR": str(tmp_path / "config"),
        "WANDB_CACHE_DIR": str(tmp_path / "cache"),
        "WANDB_DATA_DIR": str(tmp_path / "data"),
    }
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, "wandb:agenteval-test"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    took = time.monotonic() - started
    assert json.loads(done.stdout.splitlines()[-1]) == [
        "WARNING could not log to wandb:agenteval-test within 3 s (no answer); the results are kept"
    ]
    assert done.stdout.splitlines()[:-1] == [] and done.stderr == ""  # nothing of wandb's own
    assert took < 3 + 8  # the deadline, our interpreter's start and the kill: not wandb's teardown
