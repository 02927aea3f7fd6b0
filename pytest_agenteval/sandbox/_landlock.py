"""Landlock through ctypes: a file allow-list, a TCP deny and signal scoping.

Stdlib only: the zygote imports this module as a top-level file. Landlock
restricts the calling thread and its future children, so it is applied in the
single-threaded child forked by the zygote, never in the evaluator.
"""

from __future__ import annotations

import ctypes
import os
import stat

try:  # imported as part of the package (evaluator) or as a top-level file (zygote)
    from pytest_agenteval.sandbox._linux import PR_SET_NO_NEW_PRIVS, prctl, syscall
except ImportError:
    from _linux import PR_SET_NO_NEW_PRIVS, prctl, syscall  # type: ignore[no-redef]

_SYS_CREATE_RULESET = 444  # the same number on x86_64 and the generic table (aarch64)
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
_FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV

READ_ONLY = READ_FILE | READ_DIR
READ_WRITE_DEV = READ_FILE | WRITE_FILE | TRUNCATE
SCRATCH = (
    READ_FILE
    | READ_DIR
    | WRITE_FILE
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SYM
    | MAKE_FIFO
    | REFER
    | TRUNCATE
)

_NET_BIND_TCP = 1 << 0  # ABI 4
_NET_CONNECT_TCP = 1 << 1
_SCOPE_ABSTRACT_UNIX = 1 << 0  # ABI 6
_SCOPE_SIGNAL = 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1  # the kernel struct is __attribute__((packed))
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi_version() -> int:
    """The kernel's Landlock ABI (0 when Landlock is missing or disabled)."""
    try:
        return syscall(_SYS_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION)
    except OSError:
        return 0


def handled_fs(abi: int) -> int:
    mask = (1 << 13) - 1
    if abi >= 2:
        mask |= REFER
    if abi >= 3:
        mask |= TRUNCATE
    if abi >= 5:
        mask |= IOCTL_DEV
    return mask


def open_paths(paths: list[str]) -> list[tuple[int, bool]]:
    """O_PATH fds for the static allow-list, opened once in the zygote.

    Returns (fd, is_dir) pairs; missing paths are skipped.
    """
    out: list[tuple[int, bool]] = []
    for path in paths:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue
        out.append((fd, stat.S_ISDIR(os.fstat(fd).st_mode)))
    return out


def restrict(
    abi: int,
    rules: list[tuple[int, bool, int]],
    deny_tcp: bool = True,
    scope_signals: bool = True,
) -> dict:
    """Create a ruleset from (fd, is_dir, access) rules and enforce it on this thread.

    Returns what was enforced, e.g. {"abi": 7, "tcp": True, "signals": True}.
    """
    fs = handled_fs(abi)
    attr = _RulesetAttr(handled_access_fs=fs)
    size = 8
    tcp = deny_tcp and abi >= 4
    signals = scope_signals and abi >= 6
    if abi >= 4:
        size = 16
        attr.handled_access_net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if tcp else 0
    if abi >= 6:
        size = 24
        attr.scoped = (_SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL) if signals else 0
    ruleset = syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), size, 0)
    try:
        for fd, is_dir, access in rules:
            allowed = access & fs if is_dir else access & fs & _FILE_ONLY
            rule = _PathBeneath(allowed_access=allowed, parent_fd=fd)
            syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0)
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        syscall(_SYS_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)
    return {"abi": abi, "tcp": tcp, "signals": signals}
