"""Real ssh workers: the test starts Debian's sshd (openssh-server) on a free loopback port,
with a host key and a client key it generates and a config of its own, and runs the suite
on `-d --tx 2*ssh=...//python=...//chdir=DIR` workers in a folder that shares nothing with
the controller's, against the package's OpenAI test server. The controller alone writes
the results; the cache folder the two "machines" share makes a rerun regenerate nothing.

Starting sshd needs root (it switches to the logged-in user); without root or without
openssh-server the test skips, naming the install, and under AGENTEVAL_CI=1 it fails."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import pytest_agenteval
from pytest_agenteval.testing import OpenAITestServer, ServerConfig
from tests._oracle import require_oracle
from tests.conftest import TINY_PROBLEMS, read_results, write_jsonl
from tests.core._worker_recorder import worker_recorder

SUITE = Path(__file__).resolve().parents[2] / "suites" / "aime25" / "test_aime25.py"
PACKAGE = Path(pytest_agenteval.__file__).parent  # this checkout's code, rsynced to the workers
HOST = "agenteval-sshd"  # the Host entry of the generated ssh_config
PRIVSEP_DIR = Path("/run/sshd")  # sshd refuses to start without it (Debian's service makes it)
SBIN = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


@dataclass(frozen=True)
class SshHost:
    """A running sshd and the ssh_config that reaches it as `HOST`, by key, as root."""

    ssh_config: Path
    home: Path  # the keys and known_hosts
    port: int

    def tx(self, count: int, chdir: Path, form: str) -> str:
        """The xdist worker spec: execnet runs `ssh -C <after ssh=> python -c ...`, so the
        destination is either a Host entry of an ssh config (`//ssh_config=`) or the last
        word after ssh's own options."""
        rest = f"//python={sys.executable}//chdir={chdir}"
        if form == "ssh_config":
            return f"{count}*ssh={HOST}//ssh_config={self.ssh_config}{rest}"
        options = (
            f"-p {self.port} -i {self.home / 'client_key'} -o BatchMode=yes -o HostKeyAlias={HOST} "
            f"-o UserKnownHostsFile={self.home / 'known_hosts'} -o GlobalKnownHostsFile=/dev/null"
        )
        return f"{count}*ssh={options} root@127.0.0.1{rest}"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _programs() -> tuple[str, str]:
    """sshd and ssh-keygen, or the test skips (fails in CI) naming the install."""
    if os.geteuid() != 0:
        require_oracle("the ssh worker test starts its own sshd, which needs root")
    sshd, keygen = shutil.which("sshd", path=SBIN), shutil.which("ssh-keygen")
    if not sshd or not keygen or not shutil.which("ssh"):
        require_oracle("sshd or ssh missing: apt-get install -y openssh-server openssh-client")
    return sshd, keygen


def _write_config(home: Path, port: int) -> tuple[Path, Path]:
    """Keys, authorized_keys, known_hosts, sshd_config and ssh_config in `home`."""
    _, keygen = _programs()
    for name in ("host_key", "client_key"):
        subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(home / name)], check=True)
    shutil.copy(home / "client_key.pub", home / "authorized_keys")
    (home / "known_hosts").write_text(f"{HOST} {(home / 'host_key.pub').read_text()}")
    sshd_config = home / "sshd_config"
    sshd_config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {home / 'host_key'}\n"
        f"PidFile {home / 'sshd.pid'}\nAuthorizedKeysFile {home / 'authorized_keys'}\n"
        "StrictModes no\nUsePAM no\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
    )
    ssh_config = home / "ssh_config"
    ssh_config.write_text(
        f"Host {HOST}\n  HostName 127.0.0.1\n  Port {port}\n  User root\n"
        f"  IdentityFile {home / 'client_key'}\n  IdentitiesOnly yes\n  BatchMode yes\n"
        f"  HostKeyAlias {HOST}\n  UserKnownHostsFile {home / 'known_hosts'}\n"
        "  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n"
    )
    return sshd_config, ssh_config


@pytest.fixture(scope="module")
def ssh_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshHost]:
    """A real sshd on a free loopback port, reachable by key only, for the module's tests
    (it keeps no state between them: each test's workers get folders of their own)."""
    sshd, _ = _programs()
    home = tmp_path_factory.mktemp("sshd")
    port = _free_port()
    sshd_config, ssh_config = _write_config(home, port)
    PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
    checked = subprocess.run([sshd, "-t", "-f", str(sshd_config)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    log = home / "sshd.log"
    with log.open("wb") as sink:
        server = subprocess.Popen([sshd, "-D", "-e", "-f", str(sshd_config)], stdout=sink, stderr=sink)
    try:
        probe = [shutil.which("ssh") or "ssh", "-F", str(ssh_config), HOST, "true"]
        deadline = time.monotonic() + 30
        while subprocess.run(probe, capture_output=True).returncode != 0:
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"sshd did not accept the generated key: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield SshHost(ssh_config, home, port)
    finally:
        server.terminate()
        server.wait(10)


@pytest.mark.parametrize("form", ["ssh_config", "options"])
def test_ssh_workers_run_elsewhere_and_share_the_cache(
    ssh_host: SshHost, pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory, form: str
) -> None:
    seen = tmp_path_factory.mktemp("seen")
    suite = pytester.mkdir("suites") / "aime25"
    suite.mkdir()
    (suite / SUITE.name).write_text(SUITE.read_text(encoding="utf-8"), encoding="utf-8")
    (suite / "conftest.py").write_text(worker_recorder(seen), encoding="utf-8")
    shared = tmp_path_factory.mktemp("shared")  # storage both "machines" mount
    data = write_jsonl(shared / "aime25.jsonl", TINY_PROBLEMS)
    elsewhere = tmp_path_factory.mktemp("ssh-worker")  # the workers' folder on the other "host"
    with OpenAITestServer(ServerConfig(answer="\\boxed{70} {seed}")) as server:
        args = (
            "suites/aime25",
            "-d",
            "--tx",
            ssh_host.tx(2, elsewhere, form),
            "--rsyncdir",
            "suites/aime25",
            "--rsyncdir",
            str(PACKAGE),
            "--rsyncignore",
            "agenteval-results",
            "--endpoint",
            server.url,
            "--mode",
            "text-only",
            "--val-n",
            "2",
            "--dataset-path",
            str(data),
            "--agenteval-cache-dir",
            str(shared / "cache"),
            "--agenteval-out",
            "agenteval-results/ssh.jsonl",
        )
        first = pytester.runpytest_subprocess(*args)
        sent = len(server.requests)
        again = pytester.runpytest_subprocess(*args)
        resent = len(server.requests) - sent
    first.assert_outcomes(passed=1, failed=3)
    again.assert_outcomes(passed=1, failed=3)
    assert (sent, resent) == (4 * 2, 0)  # the rerun found every generation in the shared cache
    problems, (summary,) = read_results(pytester.path / "agenteval-results" / "ssh.jsonl")
    assert [len(p["generations"]) for p in problems] == [2, 2, 2, 2] and summary["complete"] is True
    workers = {p.stem: json.loads(p.read_text()) for p in seen.glob("*.json")}
    assert sorted(workers) == ["gw0", "gw1"]  # the rerun's workers overwrote the first run's
    assert {w["cwd"] for w in workers.values()} == {str(elsewhere)}
    # the worker's cwd comes first on its sys.path (xdist): it runs the rsynced copy of the code
    assert {w["package"] for w in workers.values()} == {str(elsewhere / "pytest_agenteval" / "__init__.py")}
    assert {w["dataset_path"] for w in workers.values()} == {str(data)}  # shared storage, same path
    assert {w["cache_dir"] for w in workers.values()} == {str(shared / "cache")}
    assert sorted(p.name for p in elsewhere.iterdir()) == ["_pytest", "aime25", "pytest", "pytest_agenteval"]
    assert [p for p in elsewhere.rglob("*") if p.suffix == ".jsonl" or "agenteval-results" in p.parts] == []
