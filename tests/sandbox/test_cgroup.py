"""The per-zygote cgroup on each hierarchy this machine offers (v2 with `cgroup.kill`,
v1 `pids` without it): membership follows forks, setsid and reparenting, kill empties
it, and the folder is removed. Skipped with the reason where no hierarchy is writable."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from pytest_agenteval.sandbox import _cgroup, _procs
from pytest_agenteval.sandbox._report import weak_guarantees

FACTS = {"euid": 1000, "landlock_abi": 0}


def _hierarchy(kind: str) -> str:
    for path in _cgroup._hierarchies():
        if (kind == "v2") == os.path.exists(os.path.join(path, "cgroup.controllers")):
            return path
    pytest.skip(f"no {kind} cgroup hierarchy of this process is mounted here")


@pytest.mark.parametrize("kind", ["v2", "v1"])
def test_a_cgroup_holds_a_setsid_tree_and_kill_empties_it(kind: str, monkeypatch) -> None:
    parent = _hierarchy(kind)
    monkeypatch.setattr(_cgroup, "_hierarchies", lambda: [parent])
    group = _cgroup.Cgroup.create(f"agenteval-test-{os.getpid()}-{kind}")
    if group is None:
        pytest.skip(f"the {kind} hierarchy {parent} is not writable here (needs root)")
    tree = "setsid sleep 60 & (sleep 60 &) ; sleep 60"  # a new session and an orphan
    shell = subprocess.Popen(
        ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', group.procs_file, "sh", "-c", tree]
    )
    try:
        deadline = time.monotonic() + 5
        while len(group.members()) < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        members = group.members()
        assert len(members) == 4 and shell.pid in members
        assert group.kill() == []
        shell.wait(5)
        assert not any(_procs.alive(p) for p in members)
    finally:
        _procs.kill_trees([shell.pid])
        shell.wait(5)
        group.remove()
    assert not os.path.exists(group.path)


def test_without_a_cgroup_the_report_says_what_escapes() -> None:
    without = weak_guarantees({"uid_drop": None, "cgroup": False}, FACTS)
    held = weak_guarantees({"uid_drop": None, "cgroup": True}, FACTS)
    assert [w for w in without if w.startswith("processes:")] == [
        "processes: no cgroup holds the code's processes (it needs root or a delegated cgroup): "
        "a daemon that clears its environment and outlives the zygote (killed by the code, or by "
        "the OOM killer) escapes the sweep; fork is allowed, capped by RLIMIT_NPROC at 64 "
        "processes of the sandbox uid (shared by concurrent calls); leftovers are killed when "
        "the call ends (process-group kill + subreaper sweep)"
    ]
    assert [w for w in held if w.startswith("processes:")] == [
        "processes: fork is allowed, capped by RLIMIT_NPROC at 64 processes of the sandbox uid "
        "(shared by concurrent calls); leftovers are killed when the call ends (process-group "
        "kill + subreaper sweep)"
    ]
