"""Drop a root child to uid/gid 65534 ("nobody"), optionally keeping one capability.

Why: RLIMIT_NPROC never applies to root, and a root child can kill the
evaluator and read every /proc/<pid>/environ. As uid 65534 the NPROC cap
holds, signals to root processes fail and other uids' environ is unreadable.
When the interpreter lives under a directory nobody cannot traverse (pyenv
under /root, mode 0700) lazy imports would fail, so the child keeps only
CAP_DAC_READ_SEARCH: it can still read every file, but it cannot write,
signal or ptrace as root. Stdlib only (the zygote imports it).
"""

from __future__ import annotations

import ctypes
import os
import stat

try:  # imported as part of the package (evaluator) or as a top-level file (zygote)
    from pytest_agenteval.sandbox import _linux
except ImportError:
    import _linux  # type: ignore[no-redef]

NOBODY = 65534
CAP_DAC_READ_SEARCH = 2
_CAP_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def world_readable(paths: list[str]) -> bool:
    """Whether uid 65534 can reach and read every path (every ancestor o+x, leaf o+r)."""
    for path in paths:
        parts = os.path.realpath(path).split(os.sep)
        for i in range(2, len(parts) + 1):
            try:
                mode = os.stat(os.sep.join(parts[:i]) or os.sep).st_mode
            except OSError:
                return False
            if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
                return False
        if not os.stat(path).st_mode & stat.S_IROTH:
            return False
    return True


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except OSError:
        return 40


def drop_to_nobody(keep_read_search: bool) -> None:
    """Irreversibly become uid/gid 65534 with at most CAP_DAC_READ_SEARCH left."""
    keep = {CAP_DAC_READ_SEARCH} if keep_read_search else set()
    for cap in range(_last_cap() + 1):  # the bounding set needs CAP_SETPCAP: drop it first
        if cap not in keep:
            _linux.prctl(_linux.PR_CAPBSET_DROP, cap)
    _linux.prctl(_linux.PR_CAP_AMBIENT, _linux.PR_CAP_AMBIENT_CLEAR_ALL)
    _linux.prctl(_linux.PR_SET_KEEPCAPS, 1 if keep else 0)
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)
    _linux.prctl(_linux.PR_SET_KEEPCAPS, 0)
    mask = sum(1 << c for c in keep)
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)(_CapData(mask, mask, 0), _CapData(0, 0, 0))
    if _linux.libc.capset(ctypes.byref(header), data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capset: {os.strerror(err)}")
