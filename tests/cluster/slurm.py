"""A real single-node SLURM cluster in a temporary folder, for the tests: Debian's
`slurm-wlm` and `munge`, the daemons started in the foreground as child processes of the
test session, the client commands (`sbatch`, `squeue`, `scontrol`, `scancel`) pointed at
it by `SLURM_CONF`. Nothing outside the folder is read or written: its own munge key and
socket, its own ports, spool, state and logs, so it coexists with a system SLURM and with
a second cluster started by another xdist worker.

Why each setting of `slurm.conf` is there (found on Debian 12's slurm-wlm 22.05.8, as root,
in a container without systemd, with cgroup v1 mounted read-only and a hostname that is
not `localhost`):

- `SlurmctldHost=localhost`, `NodeName=localhost NodeAddr=127.0.0.1`, `slurmd -N localhost`:
  no DNS and no /etc/hosts entry for the machine's own name is needed; slurmctld accepts
  `localhost` as itself, and `-N` tells slurmd which node it is (it would look up its
  short hostname in the file otherwise, and find no node).
- `AuthInfo=socket=...`: daemons and client commands talk to the fixture's munged, not to
  /run/munge (absent here, or another cluster's key).
- `SlurmUser=root`, `SlurmdUser=root`: the tests run as root (CI); a root-submitted job runs
  as root.
- `ProctrackType=proctrack/linuxproc`, `TaskPlugin=task/none`,
  `JobAcctGatherType=jobacct_gather/none`: no cgroups (a container cannot create them; the
  cgroup plugins fail there), jobs are tracked through their parent process ids.
- `AccountingStorageType=accounting_storage/none`, `JobCompType=jobcomp/none`: no
  slurmdbd; a job's final state is read with `scontrol` while `MinJobAge` keeps it.
- `SlurmctldPort`, `SlurmdPort`: free ports, chosen at start-up.
- `SelectType=select/cons_tres` with `CR_Core`: array tasks share the node, one core each,
  so `nproc` tasks run at once (select/linear would give each task the whole node).
- `SchedulerType=sched/builtin`: plain FIFO, a pending task starts as soon as a core frees
  (backfill adds nothing on one node and waits for its interval).
- `SchedulerParameters=batch_sched_delay=0`: a batch job is scheduled at slurmctld's next
  one-second tick, not up to 3 s later (the default): a four-task array on two cores, then
  the merge depending on it, waited about 3 s at each of those steps.
- `ReturnToService=2`: the node comes up idle when slurmd registers, with no
  `scontrol update state=resume`.
- `KillWait=2`: `scancel` sends SIGTERM, then SIGKILL 2 s later (30 s by default).
- `MailProg=/bin/true`: Debian's has no mailer; slurmctld logs an error without one.
- `MpiDefault=none`: the pmix plugins fail to load without libpmix (they log an error
  each at start-up; harmless).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_agenteval.models.serve._guard import set_parent_death_signal

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")
NODE = "localhost"
# a job pending for one of these reasons never starts on this cluster (it asks for more
# than the node has, or its dependency failed): fail at once instead of at the timeout
NEVER_STARTS = {"PartitionConfig", "BadConstraints", "DependencyNeverSatisfied", "PartitionNodeLimit"}
UNFINISHED = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"}


def binary(name: str) -> str | None:
    """The command's path; the daemons are in /usr/sbin, which a user's PATH may lack."""
    return shutil.which(name, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")


def why_no_cluster() -> str | None:
    """None when this machine can start the cluster, else the reason (for a skip)."""
    missing = [name for name in DAEMONS + CLIENTS if binary(name) is None]
    if missing:
        return f"SLURM is not installed ({', '.join(missing)} not found): apt-get install -y slurm-wlm munge"
    if os.geteuid() != 0:
        return "the SLURM cluster fixture runs slurmd as root (it starts jobs as their user): run as root"
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def slurm_conf(folder: Path, ctld_port: int, slurmd_port: int, cpus: int) -> str:
    return f"""\
ClusterName=agenteval
SlurmctldHost={NODE}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={folder / "munge" / "munge.socket"}
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
StateSaveLocation={folder / "state"}
SlurmdSpoolDir={folder / "spool"}
SlurmctldPidFile={folder / "slurmctld.pid"}
SlurmdPidFile={folder / "slurmd.pid"}
SlurmctldLogFile={folder / "log" / "slurmctld.log"}
SlurmdLogFile={folder / "log" / "slurmd.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
KillWait=2
MinJobAge=600
MailProg=/bin/true
NodeName={NODE} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
"""


@dataclass
class ArrayTask:
    """One record of `scontrol show job`: an array task (or a plain job, task None)."""

    job_id: str
    task: str | None
    state: str
    exit_code: str  # "status:signal", as scontrol prints it
    reason: str  # why it is pending ("None" once it runs)


@dataclass
class SlurmCluster:
    folder: Path
    env: dict[str, str]  # the environment the client commands need (SLURM_CONF)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.folder / "slurm.conf"

    # -- the daemons -------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> None:
        munge = self.folder / "munge"
        for name in ("state", "spool", "log", "munge"):
            (self.folder / name).mkdir(mode=0o755, exist_ok=True)
        key = munge / "munge.key"  # munged wants it private to its user, in a folder
        key.write_bytes(os.urandom(128))  # others cannot write, on a socket path all can enter
        key.chmod(0o400)
        self.conf.write_text(
            slurm_conf(self.folder, free_port(), free_port(), os.cpu_count() or 1), encoding="utf-8"
        )
        self._spawn(
            "munged",
            "munged",
            "--foreground",
            f"--socket={munge / 'munge.socket'}",
            f"--key-file={key}",
            f"--pid-file={munge / 'munged.pid'}",
            f"--seed-file={munge / 'munged.seed'}",
            f"--log-file={self.folder / 'log' / 'munged.log'}",
        )
        self._wait_for(lambda: (munge / "munge.socket").exists(), "munged's socket", timeout)
        self._spawn("slurmctld", "slurmctld", "-D", "-f", str(self.conf))
        self._spawn("slurmd", "slurmd", "-D", "-N", NODE, "-f", str(self.conf))
        self._wait_for(lambda: self.node_state() == "idle", "the node to be idle in sinfo", timeout)

    def _spawn(self, name: str, *command: str) -> None:
        log = (self.folder / "log" / f"{name}.out").open("wb")
        self.processes[name] = subprocess.Popen(
            [binary(command[0]) or command[0], *command[1:]],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
            start_new_session=True,  # no Ctrl-C of the terminal: stop() stops them in order
            preexec_fn=lambda: set_parent_death_signal(signal.SIGTERM),  # a killed session too
        )
        log.close()

    def _wait_for(self, ready: object, what: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not ready():  # type: ignore[operator]
            dead = {n: p.returncode for n, p in self.processes.items() if p.poll() is not None}
            if dead or time.monotonic() > deadline:
                why = f"exited {dead}" if dead else f"no {what} after {timeout:.0f} s"
                raise RuntimeError(f"the SLURM cluster did not start: {why}\n{self.logs()}")
            time.sleep(0.05)

    def node_state(self) -> str:
        done = self.run("sinfo", "-h", "-N", "-o", "%T", check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    def stop(self) -> None:
        """Cancel whatever still runs (slurmstepd outlives slurmd), then stop the daemons."""
        if self.processes.get("slurmctld") and self.processes["slurmctld"].poll() is None:
            self.run("scancel", "--full", "--partition=debug", check=False)
            deadline = time.monotonic() + 15
            while self.run("squeue", "-h", check=False).stdout.strip() and time.monotonic() < deadline:
                time.sleep(0.05)
        for name in reversed(DAEMONS):
            process = self.processes.get(name)
            if process is None or process.poll() is not None:
                continue
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def logs(self) -> str:
        parts = []
        for path in sorted((self.folder / "log").glob("*")):
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()[-40:]
            parts.append(f"--- {path.name} (last {len(lines)} lines)\n" + "\n".join(lines))
        return "\n".join(parts)

    # -- the client commands -----------------------------------------------------------

    def run(self, *command: str, check: bool = True, **kwargs: object) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            command, env=kwargs.pop("env", self.env), capture_output=True, text=True, timeout=60, **kwargs
        )  # type: ignore[call-overload]
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} exited {done.returncode}: {done.stderr.strip()}")
        return done

    def sbatch(self, script: Path, *args: str, cwd: Path, env: Mapping[str, str] = {}) -> str:
        """Submit `script` (sbatch exports this environment plus `env` to the job); the job id."""
        done = self.run("sbatch", "--parsable", *args, str(script), cwd=cwd, env={**self.env, **env})
        return done.stdout.strip().split(";")[0]

    def tasks(self, job_id: str) -> list[ArrayTask]:
        """Every record of the job: an array's tasks (pending ones may be one record)."""
        done = self.run("scontrol", "-o", "show", "job", job_id)
        records = []
        for line in done.stdout.splitlines():
            fields = dict(re.findall(r"(\w+)=(\S*)", line))
            records.append(
                ArrayTask(
                    fields["JobId"],
                    fields.get("ArrayTaskId"),
                    fields["JobState"],
                    fields["ExitCode"],
                    fields["Reason"],
                )
            )
        return records

    def wait(self, job_ids: Sequence[str], logs: Path, timeout: float = 180.0) -> dict[str, ArrayTask]:
        """Wait until no task of these jobs is pending or running; the tasks by
        `JOBID_TASK` (or `JOBID`). On timeout: fail with the job logs and the daemons'."""
        deadline = time.monotonic() + timeout
        while True:
            records = [(job, task) for job in job_ids for task in self.tasks(job)]
            if all(task.state not in UNFINISHED for _, task in records):
                return {job if t.task is None else f"{job}_{t.task}": t for job, t in records}
            hopeless = [t for _, t in records if t.state == "PENDING" and t.reason in NEVER_STARTS]
            if hopeless or time.monotonic() > deadline:
                states = ", ".join(f"{job}_{t.task}: {t.state} ({t.reason})" for job, t in records)
                late = "will never start" if hopeless else f"not finished after {timeout:.0f} s"
                why = f"SLURM jobs {late}: {states}"
                raise AssertionError(f"{why}\n{job_logs(logs)}\n{self.logs()}")
            time.sleep(0.1)  # a poll is one scontrol call (milliseconds)

    def scancel(self, job_id: str) -> None:
        self.run("scancel", job_id)


def job_logs(folder: Path) -> str:
    """The jobs' output files (`#SBATCH --output`), for a failure message."""
    parts = []
    for path in sorted(folder.glob("*.log")):
        parts.append(f"--- {path.name}\n" + path.read_text(encoding="utf-8", errors="replace")[-4000:])
    return "\n".join(parts) or f"(no job logs in {folder})"
