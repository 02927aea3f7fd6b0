"""Runs beyond one machine with pytest-xdist's own means: workers that start in another
directory (`--tx popen//chdir=DIR`, as ssh workers do) and a worker behind an execnet
socket server addressed as another host (`--tx socket=HOST:PORT`). Paths given relative
to the controller's cwd still work, only the controller writes results, the cache
folder is shared, and per-machine limits are split among the workers of each host."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import execnet
import pytest

from pytest_agenteval.config.options import OPTIONS
from pytest_agenteval.plugin import hosts
from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests.conftest import TINY_PROBLEMS, read_results, write_jsonl
from tests.core._worker_recorder import worker_recorder

OTHER_HOST = "127.0.0.2"  # loopback, but another name: xdist and we see another machine
SOCKET_SERVER = Path(execnet.__file__).parent / "script" / "socketserver.py"


def _spec(text: str) -> execnet.XSpec:
    return execnet.XSpec(text)


def test_hosts_are_told_apart_by_the_address_in_tx() -> None:
    specs = [
        _spec("popen"),
        _spec("popen//chdir=/tmp/a"),
        _spec("ssh=alice@gpu1//python=python3"),
        _spec("ssh=gpu1"),
        _spec("socket=10.0.0.2:8888"),
        _spec("socket=localhost:8888"),
        _spec("ssh=-p 2222 -i /keys/id alice@gpu2//python=python3"),
        _spec("ssh=-p 2222 gpu2"),
        _spec("ssh=-p 2222 root@127.0.0.1"),
    ]
    assert [hosts.host_of(s) for s in specs] == [
        "localhost",
        "localhost",
        "gpu1",
        "gpu1",
        "10.0.0.2",
        "localhost",
        "gpu2",
        "gpu2",
        "localhost",
    ]
    assert [hosts.placement(specs, s) for s in specs] == [
        (0, 4),
        (1, 4),
        (0, 2),
        (1, 2),
        (0, 1),
        (2, 4),
        (0, 2),
        (1, 2),
        (3, 4),
    ]


def test_a_limit_splits_with_the_remainder_to_the_first_workers() -> None:
    assert [hosts.share(5, i, 3) for i in range(3)] == [2, 2, 1]
    assert [hosts.share(2, i, 3) for i in range(3)] == [1, 1, 1]  # never 0


def test_only_endpoints_on_the_workers_own_machine_are_split_per_host() -> None:
    assert hosts.host_local(("http://127.0.0.1:8000/v1", "http://localhost:8001/v1")) is True
    assert hosts.host_local(("http://127.0.0.1:8000/v1", "http://gpu7:8000/v1")) is False
    assert hosts.host_local(()) is False


def test_every_option_a_worker_reads_from_disk_is_resolved_for_it() -> None:
    names = {o.dest for o in OPTIONS} | {"model_path"}  # a one-model run's --model-path
    assert set(hosts.WORKER_PATH_OPTIONS) <= names
    assert "out" not in hosts.WORKER_PATH_OPTIONS  # results: the controller alone


def test_paths_map_into_the_rsync_copy_and_the_cache_stays_shared(tmp_path: Path) -> None:
    from pytest_agenteval.config.options import Settings

    root = tmp_path / "suite"
    (root / "data").mkdir(parents=True)
    data = write_jsonl(root / "data" / "tiny.jsonl", TINY_PROBLEMS)
    outside = write_jsonl(tmp_path / "elsewhere.jsonl", TINY_PROBLEMS)
    fields = {f: None for f in Settings.__dataclass_fields__}
    base = Settings(**{**fields, "dataset_path": str(data), "model_path": "replay:" + str(outside)})
    cache = tmp_path / "cache"
    remote = hosts.worker_paths(base, _spec("ssh=gpu1"), [root], cache)
    here = hosts.worker_paths(base, _spec("popen"), [root], cache)
    assert remote == {"dataset_path": "suite/data/tiny.jsonl", "model_path": f"replay:{outside}"}
    assert here == {"dataset_path": str(data), "model_path": f"replay:{outside}", "cache_dir": str(cache)}


@pytest.fixture
def socket_worker_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real execnet socket server on another loopback address: a 'remote host'."""
    with socket.socket() as probe:
        probe.bind((OTHER_HOST, 0))
        port = probe.getsockname()[1]
    home = tmp_path_factory.mktemp("other-host")
    server = subprocess.Popen(
        [sys.executable, str(SOCKET_SERVER), f"{OTHER_HOST}:{port}"],
        cwd=home,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection((OTHER_HOST, port), timeout=1).close()
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail("the execnet socket server did not start")
            time.sleep(0.1)
    yield f"{OTHER_HOST}:{port}"
    server.kill()
    server.wait(10)


def test_workers_in_other_directories_and_on_another_host(
    aime_suite: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory, socket_worker_host: str
) -> None:
    controller = aime_suite.path
    (controller / "data").mkdir()
    write_jsonl(controller / "data" / "tiny.jsonl", TINY_PROBLEMS)
    seen = tmp_path_factory.mktemp("seen")
    aime_suite.makeconftest(worker_recorder(seen))
    first, second = tmp_path_factory.mktemp("worker-a"), tmp_path_factory.mktemp("worker-b")
    relative = ("--dataset-path=data/tiny.jsonl", "--agenteval-cache-dir=cache")  # as a user types them
    with OpenAITestServer(ServerConfig(answer="\\boxed{70} {seed}")) as server:
        result = aime_suite.runpytest_subprocess(
            "-p",
            "no:cacheprovider",
            "--mode=text-only",
            f"--endpoint={server.url}",
            "--val-n=2",
            "--concurrency=5",
            "--sandbox-workers=3",
            *relative,
            "--agenteval-out=agenteval-results/remote.jsonl",
            "--dist=load",
            f"--tx=popen//chdir={first}",
            f"--tx=popen//chdir={second}",
            f"--tx=socket={socket_worker_host}",
            f"--rsyncdir={controller}",
            str(controller / "test_tiny.py"),
        )
        sent = len(server.requests)
        again = aime_suite.runpytest_subprocess(
            "-p", "no:cacheprovider", "--mode=text-only", f"--endpoint={server.url}", "--val-n=2", *relative
        )
        resent = len(server.requests) - sent
    result.assert_outcomes(passed=1, failed=3)
    problems, (summary,) = read_results(controller / "agenteval-results" / "remote.jsonl")
    assert [len(p["generations"]) for p in problems] == [2, 2, 2, 2] and summary["complete"] is True
    assert (sent, resent) == (8, 0)  # the workers' cache is the controller's cache
    again.assert_outcomes(passed=1, failed=3)
    workers = {p.stem: json.loads(p.read_text()) for p in seen.glob("*.json")}
    assert sorted(workers) == ["gw0", "gw1", "gw2"]
    assert [workers[w]["cwd"] for w in ("gw0", "gw1")] == [str(first), str(second)]
    assert {w["dataset_path"] for w in workers.values()} == {f"{controller.name}/data/tiny.jsonl"}
    assert {w["cache_dir"] for w in workers.values()} == {str(controller / "cache")}
    # the two workers here split this machine's limits; the other host's worker has its own
    assert [(workers[w]["concurrency"], workers[w]["sandbox_workers"]) for w in ("gw0", "gw1", "gw2")] == [
        (3, 2),
        (2, 1),
        (5, 3),
    ]
    written = [p for d in (first, second, Path(workers["gw2"]["cwd"])) for p in d.rglob("*.jsonl*")]
    assert [p.name for p in written] == ["tiny.jsonl"] * 3  # only the rsync copies of the data
