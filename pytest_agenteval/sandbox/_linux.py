"""Thin ctypes helpers for the Linux calls the sandbox needs (stdlib only).

Arguments go through c_ulong explicitly: prctl(2) rejects garbage in the
upper halves of unused arguments, which plain Python ints passed to a
variadic function would leave there.
"""

from __future__ import annotations

import ctypes
import os
import platform

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.prctl.restype = ctypes.c_int

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_KEEPCAPS = 8
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4

MACHINE = platform.machine()


def prctl(option: int, a2: int | ctypes.c_void_p = 0, a3: int = 0, a4: int = 0, a5: int = 0) -> int:
    """prctl(2), raising OSError on failure."""
    arg2 = a2 if isinstance(a2, ctypes.c_void_p) else ctypes.c_ulong(a2)
    ret = libc.prctl(ctypes.c_int(option), arg2, ctypes.c_ulong(a3), ctypes.c_ulong(a4), ctypes.c_ulong(a5))
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")
    return ret


def syscall(number: int, *args: object) -> int:
    """syscall(2) with every integer argument widened to a long; OSError on failure."""
    conv = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    ret = libc.syscall(ctypes.c_long(number), *conv)
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"syscall {number}: {os.strerror(err)}")
    return ret
