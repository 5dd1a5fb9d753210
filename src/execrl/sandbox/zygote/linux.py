"""Raw Linux system calls the jail needs, via ctypes (x86_64 only).

Why ctypes and not the ``mount``/``unshare``/``ip`` tools: every fork+exec of a helper costs milliseconds and
a shell, and the zygote must stay a single small process. The standard library already covers ``fork``,
``setuid``, ``setrlimit``, ``pidfd_open``, ``pidfd_send_signal`` and ``memfd_create``; this module adds the
rest. Every wrapper raises ``OSError`` with errno and a short description when the kernel refuses.

This module is imported by the zygote, which must stay small: no heavy imports here.
"""

from __future__ import annotations

import ctypes
import os

_libc = ctypes.CDLL(None, use_errno=True)  # the C library the interpreter is linked with
_libc.syscall.restype = ctypes.c_long
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
]

IS_X86_64 = os.uname().machine == "x86_64"

# Namespace flags (linux/sched.h).
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
NAMESPACE_FLAGS = (
    CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
)

# Mount flags (linux/mount.h).
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

# prctl options (linux/prctl.h).
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECCOMP_MODE_FILTER = 2

# x86_64 system call numbers used directly here.
SYS_PIVOT_ROOT = 155
SYS_CAPSET = 126
SYS_SETHOSTNAME = 170
SYS_CLONE = 56
SIGCHLD = 17


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), f"unshare(0x{flags:x})")


def setns(fd: int, nstype: int) -> None:
    _check(_libc.setns(fd, nstype), f"setns({fd}, 0x{nstype:x})")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(value: str | None) -> bytes | None:
        return None if value is None else value.encode()

    rc = _libc.mount(enc(source), target.encode(), enc(fstype), flags, enc(data))
    _check(rc, f"mount({source!r} -> {target!r}, {fstype!r}, flags=0x{flags:x}, {data!r})")


def umount2(target: str, flags: int) -> None:
    _check(_libc.umount2(target.encode(), flags), f"umount2({target!r})")


def pivot_root(new_root: str, put_old: str) -> None:
    rc = _libc.syscall(SYS_PIVOT_ROOT, new_root.encode(), put_old.encode())
    _check(int(rc), f"pivot_root({new_root!r}, {put_old!r})")


def clone_process(flags: int) -> int:
    """``fork()`` straight into new namespaces: raw ``clone(flags | SIGCHLD)`` with the caller's stack.

    Saves the intermediate process that ``unshare(CLONE_NEWPID)`` + ``fork()`` needs (the calling
    process must keep its own pid namespace). Unlike ``os.fork`` this runs no at-fork handlers and does
    not refresh the C library's cached thread id in the child, so it is only for the zygote: a
    single-threaded process that imports neither ``threading`` nor ``random``, whose child never calls
    ``raise()``/``pthread_kill`` and only starts processes with ``os.fork`` (which sets the id right).
    Returns the child's pid in the parent and 0 in the child.
    """
    null = ctypes.c_void_p(None)
    rc = int(_libc.syscall(ctypes.c_long(SYS_CLONE), ctypes.c_ulong(flags | SIGCHLD), null, null, null, null))
    if rc < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"clone(0x{flags:x}): {os.strerror(err)}")
    return rc


def sethostname(name: str) -> None:
    data = name.encode()
    _check(int(_libc.syscall(SYS_SETHOSTNAME, data, len(data))), "sethostname")


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> None:
    _check(_libc.prctl(option, arg2, arg3, arg4, arg5), f"prctl({option})")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


# Built once, at import (in the zygote, before any fork): a worker's capset then allocates nothing.
_CAP_HEADER = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
_CAP_NONE = (_CapData * 2)()


def clear_all_capabilities() -> None:
    """capset(effective = permitted = inheritable = 0) for this thread. The ambient set empties with them:
    the kernel keeps it a subset of permitted and inheritable."""
    rc = _libc.syscall(SYS_CAPSET, ctypes.byref(_CAP_HEADER), ctypes.byref(_CAP_NONE))
    _check(int(rc), "capset(0)")


def set_capabilities(permitted: int, effective: int) -> None:
    """capset: these permitted and effective sets (bit ``n`` is capability ``n``; inheritable empty) for
    this thread. A session template keeps a few in its own user namespace (``zygote/session_userns.py``)."""
    data = (_CapData * 2)()
    for word in (0, 1):
        data[word].permitted = (permitted >> (32 * word)) & 0xFFFFFFFF
        data[word].effective = (effective >> (32 * word)) & 0xFFFFFFFF
    _check(int(_libc.syscall(SYS_CAPSET, ctypes.byref(_CAP_HEADER), ctypes.byref(data))), "capset")


def drop_bounding_set() -> None:
    """Remove every capability from the bounding set (needs CAP_SETPCAP, i.e. do it before setuid)."""
    with open("/proc/sys/kernel/cap_last_cap") as fh:
        last = int(fh.read())
    for cap in range(last + 1):
        prctl(PR_CAPBSET_DROP, cap)


def supports_namespaces() -> bool:
    """True if this host lets us create the namespaces the strict backend needs (root + /proc/self/ns)."""
    needed = ("mnt", "pid", "net", "ipc", "uts")
    return os.geteuid() == 0 and all(os.path.exists(f"/proc/self/ns/{ns}") for ns in needed)


MAP_PRIVATE, MAP_FIXED, MAP_ANONYMOUS = 0x02, 0x10, 0x20


def map_anonymous_fixed(address: int, length: int, prot: int) -> None:
    """Replace ``[address, address + length)`` with fresh private anonymous memory (``MAP_FIXED``):
    how a session's fork turns a shared mapping it inherited into a private one
    (``zygote/session_fork.py``)."""
    flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED
    got = _libc.mmap(ctypes.c_void_p(address), ctypes.c_size_t(length), prot, flags, -1, 0)
    if got != address:
        err = ctypes.get_errno()
        raise OSError(err, f"mmap(0x{address:x}, {length}): {os.strerror(err)}")
