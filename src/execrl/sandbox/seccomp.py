"""A hand-assembled classic-BPF seccomp filter (deny list with argument checks), installed via prctl.

Why a deny list and not an allow list: the candidate runs a full CPython (and g++/ld for C++), whose
syscall set is large and changes with the C library; an allow list would be brittle, while the syscalls
that matter for escapes and host interference are a short, well-known list (Docker's and isolate's
defaults; research notes, hazards 11, 17, 18). Limits: a deny list cannot stop bugs in allowed syscalls
(shared kernel).

Program layout (every jump is forward, as cBPF requires):

1. ``arch != AUDIT_ARCH_X86_64`` -> kill the process (blocks the 32-bit ``int 0x80`` entry).
2. ``nr >= 0x40000000`` (x32 ABI numbers) -> kill the process.
3. ``socket(family, ...)``: allowed only for ``AF_UNIX``; anything else -> EPERM.
4. ``ioctl(fd, TIOCSTI | TIOCLINUX, ...)`` -> EPERM (terminal injection).
5. ``clone(flags)`` with any namespace flag -> EPERM; ``clone3`` -> ENOSYS (its flags sit behind a
   pointer BPF cannot read; the C library then falls back to ``clone``).
6. Denied syscalls (``DENIED_SYSCALLS``) -> EPERM. Everything else is allowed.
"""

from __future__ import annotations

import ctypes
import errno
import struct

from execrl.sandbox import linux

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000

SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000

# BPF opcodes.
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K

# Offsets in struct seccomp_data.
_OFF_NR = 0
_OFF_ARCH = 4
_OFF_ARG0_LO = 16
_OFF_ARG1_LO = 24

SYS_IOCTL = 16
SYS_SOCKET = 41
SYS_CLONE = 56
SYS_CLONE3 = 435
AF_UNIX = 1
TIOCSTI = 0x5412
TIOCLINUX = 0x541C

# name -> x86_64 number; each is denied with EPERM.
DENIED_SYSCALLS: dict[str, int] = {
    "ptrace": 101,
    "syslog": 103,
    "vhangup": 153,
    "modify_ldt": 154,
    "pivot_root": 155,
    "adjtimex": 159,
    "chroot": 161,
    "acct": 163,
    "settimeofday": 164,
    "mount": 165,
    "umount2": 166,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "iopl": 172,
    "ioperm": 173,
    "init_module": 175,
    "delete_module": 176,
    "quotactl": 179,
    "lookup_dcookie": 212,
    "clock_settime": 227,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "unshare": 272,
    "perf_event_open": 298,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "clock_adjtime": 305,
    "setns": 308,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
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
    "pidfd_getfd": 438,
    "mount_setattr": 442,
}

# The namespace bits of clone(2)'s flags (CLONE_NEWTIME is 0x80 but only reachable via clone3/unshare).
CLONE_NAMESPACE_MASK = linux.NAMESPACE_FLAGS


def _stmt(code: int, k: int) -> tuple[int, int, int, int]:
    return (code, 0, 0, k)


def _jump(code: int, k: int, jt: int, jf: int) -> tuple[int, int, int, int]:
    return (code, jt, jf, k)


def build_filter() -> bytes:
    """Assemble the filter; returns the packed ``struct sock_filter`` array."""
    eperm = SECCOMP_RET_ERRNO | errno.EPERM
    prog: list[tuple[int, int, int, int]] = [
        _stmt(_LD_W_ABS, _OFF_ARCH),
        _jump(_JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        _stmt(_RET_K, SECCOMP_RET_KILL_PROCESS),
        _stmt(_LD_W_ABS, _OFF_NR),
        _jump(_JGE_K, X32_SYSCALL_BIT, 0, 1),
        _stmt(_RET_K, SECCOMP_RET_KILL_PROCESS),
        # socket: only AF_UNIX.
        _jump(_JEQ_K, SYS_SOCKET, 0, 4),
        _stmt(_LD_W_ABS, _OFF_ARG0_LO),
        _jump(_JEQ_K, AF_UNIX, 1, 0),
        _stmt(_RET_K, eperm),
        _stmt(_RET_K, SECCOMP_RET_ALLOW),
        # ioctl: no terminal injection.
        _jump(_JEQ_K, SYS_IOCTL, 0, 5),
        _stmt(_LD_W_ABS, _OFF_ARG1_LO),
        _jump(_JEQ_K, TIOCSTI, 2, 0),
        _jump(_JEQ_K, TIOCLINUX, 1, 0),
        _stmt(_RET_K, SECCOMP_RET_ALLOW),
        _stmt(_RET_K, eperm),
        # clone: no namespace flags.
        _jump(_JEQ_K, SYS_CLONE, 0, 4),
        _stmt(_LD_W_ABS, _OFF_ARG0_LO),
        _jump(_JSET_K, CLONE_NAMESPACE_MASK, 0, 1),
        _stmt(_RET_K, eperm),
        _stmt(_RET_K, SECCOMP_RET_ALLOW),
        _jump(_JEQ_K, SYS_CLONE3, 0, 1),
        _stmt(_RET_K, SECCOMP_RET_ERRNO | errno.ENOSYS),
    ]
    denied = sorted(set(DENIED_SYSCALLS.values()))
    for index, number in enumerate(denied):
        # Jump to the shared "return EPERM" at the end when equal.
        remaining = len(denied) - index - 1
        prog.append(_jump(_JEQ_K, number, remaining + 1, 0))
    prog.append(_stmt(_RET_K, SECCOMP_RET_ALLOW))
    prog.append(_stmt(_RET_K, eperm))
    return b"".join(struct.pack("HBBI", code, jt, jf, k) for code, jt, jf, k in prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class PreparedFilter:
    """A filter program already in C memory (built once in the zygote), so installing it in each worker is
    a single ``prctl`` that allocates nothing."""

    __slots__ = ("_buffer", "_fprog", "address")

    def __init__(self, program: bytes) -> None:
        self._buffer = ctypes.create_string_buffer(program, len(program))
        self._fprog = _SockFprog(len(program) // 8, ctypes.addressof(self._buffer))
        self.address = ctypes.addressof(self._fprog)

    def install(self) -> None:
        """Install on the calling thread (and every child it forks). Needs NO_NEW_PRIVS first."""
        linux.prctl(linux.PR_SET_SECCOMP, linux.SECCOMP_MODE_FILTER, self.address)
