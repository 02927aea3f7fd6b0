"""The containment report: active layers and, in words, what they do not guarantee."""

from __future__ import annotations

from pytest_agenteval.sandbox._privdrop import NOBODY

ALWAYS = ["rlimits", "session", "scratch", "minimal_env", "subreaper"]
# the layers each level stands for (docs/sandbox.md): what "this level" means on any machine
PROMISED = {
    "auto": ("bwrap", "landlock", "seccomp"),  # the strongest set; auto takes what works
    "bwrap": ("bwrap", "landlock", "seccomp"),
    "landlock": ("landlock", "seccomp"),
    "basic": (),
}
HOW_TO_GET = {
    "bwrap": (
        "install bubblewrap (apt-get install bubblewrap, dnf install bubblewrap) and allow "
        "unprivileged user namespaces (docs/sandbox.md#installing-bubblewrap)"
    ),
    "landlock": "run on a Linux >= 5.13 kernel with Landlock enabled (landlock in the lsm= boot parameter)",
    "seccomp": "run on x86_64 or aarch64 (the seccomp filter's syscall tables)",
}


def layers_of(got: dict) -> list[str]:
    layers = list(ALWAYS)
    if got.get("uid_drop") is not None:
        layers.append("uid_nobody")
    for name in ("cgroup", "landlock", "seccomp", "bwrap"):
        if got.get(name):
            layers.append(name)
    return layers


def _files(got: dict, euid: int, root_child: bool) -> str | None:
    if got.get("landlock") or got.get("bwrap"):
        return None
    if root_child:
        return "files: the code runs as root and can read and write every file, the evaluator's included"
    if got.get("uid_drop"):
        return (
            f"files: uid {NOBODY} keeps CAP_DAC_READ_SEARCH (the interpreter is not "
            "world-readable), so the code can read every file (/etc/shadow, the "
            f"evaluator's files); it can write wherever uid {NOBODY} can "
            "(world-writable directories such as /tmp and /dev/shm)"
        )
    if got.get("uid_drop") is False:
        return (
            f"files: as uid {NOBODY} the code can read world-readable files and write "
            "world-writable directories such as /tmp and /dev/shm"
        )
    return f"files: the code can read and write every file of uid {euid}, the evaluator's user"


def _processes(got: dict, euid: int) -> str | None:
    if got.get("seccomp"):
        return None
    if not got.get("cgroup") and not got.get("bwrap"):
        return (
            "processes: no cgroup holds the code's processes (it needs root or a delegated "
            "cgroup): a daemon that clears its environment and outlives the zygote (killed "
            "by the code, or by the OOM killer) escapes the sweep; " + _fork_line(got, euid)
        )
    return "processes: " + _fork_line(got, euid)


def _fork_line(got: dict, euid: int) -> str:
    capped = got.get("uid_drop") is not None or (euid != 0 and not got.get("bwrap"))
    if capped:
        return (
            "fork is allowed, capped by RLIMIT_NPROC at 64 processes of the "
            "sandbox uid (shared by concurrent calls); leftovers are killed when the call "
            "ends (process-group kill + subreaper sweep)"
        )
    return (
        "fork is allowed and not capped (RLIMIT_NPROC does not bind root): a "
        "fork bomb runs until the wall timeout, then the process-group kill and the "
        "subreaper sweep remove it"
    )


def weak_guarantees(got: dict, facts: dict) -> list[str]:
    euid = facts["euid"]
    abi = facts["landlock_abi"] if got.get("landlock") else 0
    root_child = euid == 0 and got.get("uid_drop") is None and not got.get("bwrap")
    out: list[str] = []
    if not (got.get("seccomp") or got.get("bwrap")):
        tcp = " (Landlock denies TCP connect/bind; UDP is still allowed)" if abi >= 4 else ""
        out.append(
            "network: sockets are allowed; the code can reach the network and "
            f"services listening on 127.0.0.1{tcp}"
        )
    for item in (_files(got, euid, root_child), _processes(got, euid)):
        if item:
            out.append(item)
    if root_child:
        out.append(
            "secrets and signals: the code runs as root: it can read every "
            "/proc/<pid>/environ (the evaluator's API keys) and kill any process"
        )
    elif euid != 0 and abi < 6 and not got.get("bwrap"):
        out.append(
            f"signals: the code can signal every process of uid {euid}, the evaluator "
            "included (its /proc/<pid>/environ is guarded by PR_SET_DUMPABLE=0 only)"
        )
    if not got.get("landlock"):
        out.append(
            "isolation between calls: concurrent calls share a uid and can reach each "
            "other's scratch directories"
        )
    out.append(
        "memory: RLIMIT_AS caps each process's address space, not the total over processes (no cgroup)"
    )
    if got.get("seccomp"):
        out.append("kernel: seccomp is a deny-list; the rest of the syscall surface is reachable")
    return out


def build_report(requested: str, got: dict, off: dict, facts: dict) -> dict:
    layers = layers_of(got)
    strong = bool(got.get("seccomp")) and bool(got.get("landlock") or got.get("bwrap"))
    level = "strong" if strong else "basic"
    warning = None
    if not strong:
        why = "; ".join(f"{k}: {v}" for k, v in off.items()) or f"level={requested!r} requested"
        warning = (
            "sandbox: only basic containment is active for model-written code ("
            f"{why}). See weak_guarantees; install bubblewrap or use a kernel with "
            "Landlock and seccomp for the strong level."
        )
    elif requested in ("bwrap",) and not got.get("bwrap"):
        warning = f"sandbox: level 'bwrap' requested but bubblewrap is unusable: {off.get('bwrap')}"
    missing = {layer: off.get(layer, "not active") for layer in PROMISED[requested] if not got.get(layer)}
    details = {
        "euid": facts["euid"],
        "sandbox_uid": NOBODY if got.get("uid_drop") is not None else facts["euid"],
        "keeps_cap_dac_read_search": bool(got.get("uid_drop")),
        "landlock_abi": facts["landlock_abi"],
        "bwrap": facts.get("bwrap_version") if got.get("bwrap") else None,
        "unavailable": dict(off),
    }
    return {
        "level": level,
        "layers": layers,
        "weak_guarantees": weak_guarantees(got, facts),
        "warning": warning,
        "requested": requested,
        "missing": missing,  # layers the requested level stands for that this machine did not give
        "details": details,
    }


def shortfall(report: dict) -> str | None:
    """For a level named explicitly (not auto): one line naming each layer of it this
    machine cannot give, why, and how to get it; None when it gives them all."""
    if report["requested"] == "auto" or not report["missing"]:
        return None
    missing = report["missing"].items()
    return "; ".join(f"{layer} is unavailable ({why}): {HOW_TO_GET[layer]}" for layer, why in missing)
