"""A seccomp-BPF deny-list, assembled by hand (stdlib only, no libseccomp).

The filter refuses what math code never needs and what escapes rely on:
sockets of every family (AF_UNIX too: it reaches daemon sockets such as
docker.sock), new processes (fork, vfork, clone without CLONE_THREAD; clone3
answers ENOSYS so libc falls back to clone, whose flags can be inspected),
ptrace and friends, namespaces, mounts, bpf, keyrings, userfaultfd,
perf_event_open, io_uring (its ops bypass seccomp), open_by_handle_at and
module/kexec loading. Threads keep working. Like Landlock it binds only the
calling thread and its children, so the zygote's child applies it.
"""

from __future__ import annotations

import ctypes
import errno
import struct

try:  # imported as part of the package (evaluator) or as a top-level file (zygote)
    from pytest_agenteval.sandbox._linux import MACHINE, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, prctl
except ImportError:
    from _linux import MACHINE, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, prctl  # type: ignore

_SECCOMP_MODE_FILTER = 2
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000
_LD_W_ABS = 0x20
_JEQ = 0x15
_JGE = 0x35
_JSET = 0x45
_RET = 0x06
_CLONE_THREAD = 0x00010000
_X32_BIT = 0x40000000

# name -> number per architecture; names absent from an arch are simply skipped.
_X86_64 = {
    "socket": 41,
    "clone": 56,
    "fork": 57,
    "vfork": 58,
    "ptrace": 101,
    "syslog": 103,
    "vhangup": 153,
    "pivot_root": 155,
    "chroot": 161,
    "acct": 163,
    "mount": 165,
    "umount2": 166,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "iopl": 172,
    "ioperm": 173,
    "init_module": 175,
    "delete_module": 176,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "unshare": 272,
    "perf_event_open": 298,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "setns": 308,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "kcmp": 312,
    "finit_module": 313,
    "kexec_file_load": 320,
    "bpf": 321,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "clone3": 435,
    "pidfd_getfd": 438,
    "mount_setattr": 442,
}
_AARCH64 = {
    "umount2": 39,
    "mount": 40,
    "pivot_root": 41,
    "chroot": 51,
    "acct": 89,
    "unshare": 97,
    "kexec_load": 104,
    "init_module": 105,
    "delete_module": 106,
    "syslog": 116,
    "ptrace": 117,
    "reboot": 142,
    "socket": 198,
    "add_key": 217,
    "request_key": 218,
    "keyctl": 219,
    "clone": 220,
    "swapon": 224,
    "swapoff": 225,
    "perf_event_open": 241,
    "name_to_handle_at": 264,
    "open_by_handle_at": 265,
    "setns": 268,
    "process_vm_readv": 270,
    "process_vm_writev": 271,
    "kcmp": 272,
    "finit_module": 273,
    "bpf": 280,
    "userfaultfd": 282,
    "kexec_file_load": 294,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "clone3": 435,
    "pidfd_getfd": 438,
    "mount_setattr": 442,
}
_ARCHES = {"x86_64": (0xC000003E, _X86_64), "aarch64": (0xC00000B7, _AARCH64)}


def supported() -> bool:
    """Whether this module knows the syscall table of this machine."""
    return MACHINE in _ARCHES


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def build_filter() -> bytes:
    """The BPF program as raw bytes (built once in the zygote, loaded per child)."""
    audit_arch, table = _ARCHES[MACHINE]
    deny = _RET_ERRNO | errno.EPERM
    prog = [
        _ins(_LD_W_ABS, 4),
        _ins(_JEQ, audit_arch, 1, 0),
        _ins(_RET, _RET_KILL_PROCESS),
        _ins(_LD_W_ABS, 0),
    ]
    if MACHINE == "x86_64":  # x32 syscalls would bypass the numbers below
        prog += [_ins(_JGE, _X32_BIT, 0, 1), _ins(_RET, deny)]
    for name, nr in table.items():
        if name == "clone":
            continue
        action = _RET_ERRNO | errno.ENOSYS if name == "clone3" else deny
        prog += [_ins(_JEQ, nr, 0, 1), _ins(_RET, action)]
    # clone: threads (CLONE_THREAD set) pass, process creation is refused.
    prog += [
        _ins(_JEQ, table["clone"], 0, 4),
        _ins(_LD_W_ABS, 16),
        _ins(_JSET, _CLONE_THREAD, 1, 0),
        _ins(_RET, deny),
        _ins(_RET, _RET_ALLOW),
        _ins(_RET, _RET_ALLOW),
    ]
    return b"".join(prog)


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(program: bytes) -> None:
    """Load the filter on the calling thread (sets no_new_privs first)."""
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = _Fprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    prctl(PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog))
